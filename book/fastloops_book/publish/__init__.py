"""Present and publish the notebooks: JupyterLab, slide decks, a static site, text twins for review.

- `python -m fastloops_book.publish.lab`      JupyterLab on localhost in notebooks/ (`make lab`)
- `python -m fastloops_book.publish.slides`   slide metadata on every cell (`make slides-meta`)
- `python -m fastloops_book.publish.deck`     an offline reveal.js deck of one notebook (`make slides`)
- `python -m fastloops_book.publish.site`     a browsable site of the executed notebooks (`make site`)
- `python -m fastloops_book.publish.twins`    jupytext percent scripts beside the notebooks (`make twins`)

Nothing here reaches the network: reveal.js comes from an installed package, images are embedded.
"""
