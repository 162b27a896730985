# The README's commands. Each one sets up .venv first (idempotent, quick the second time).
SHELL   := /bin/bash
PYTHON  ?= python3
SCALE   ?= workshop
VENV    := .venv
PY      := $(VENV)/bin/python
RESULTS := results
PYTHON_VERSION ?= 3.12
WHEELHOUSE ?= wheelhouse
# make test's seed for the warp (book/fastloops_book/instruments/warp.py): each timed contender's durations x 1/16 to 16; WARP= turns it off.
# The runner starts pytest with the instruments' folder on PYTHONPATH, so every process below it installs the warp
WARP    ?= 1
# Native loggers that write below Python, to the terminal (a setting of your own wins): TensorFlow's INFO lines (its
# CPU-feature banner) and oneDNN notice (tf.data, the one TensorFlow part timed here, runs no oneDNN kernel), and
# the torch profiler's two trace lines per profile (kineto prints them at every level below 6, its errors too)
export TF_CPP_MIN_LOG_LEVEL ?= 1
export TF_ENABLE_ONEDNN_OPTS ?= 0
export KINETO_LOG_LEVEL ?= 6
ALL_NB  := $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
CONCLUSION := notebooks/13_conclusion.ipynb
NBVAL   := --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg \
           --nbval-cell-timeout=600 --nbval-kernel-startup-timeout=120

.PHONY: setup wheelhouse test liveness reproduce notebooks lab bench clean slides site twins slides-meta student gpu-check

setup:  ## create .venv and install everything (ffcv when its system libraries can be had); offline: make setup WHEELS=DIR
	@bash .ci/setup.sh $(PYTHON)

wheelhouse:  ## where the registry is reachable: wheels for an offline machine's Python (PYTHON_VERSION=3.12) into WHEELHOUSE=wheelhouse
	@$(PYTHON) .ci/wheelhouse.py --python-version $(PYTHON_VERSION) --out $(WHEELHOUSE)

test:  ## unit tests + nbval over every notebook at the smoke scale, durations warped (a timing-dependent compared cell fails)
	@start=$$(date +%s); \
	bash .ci/setup.sh $(PYTHON) && \
	FASTLOOPS_WARP=$(WARP) FASTLOOPS_SCALE=smoke FASTLOOPS_RESULTS=$(RESULTS)/smoke $(PY) -m fastloops_book.runner pytest -q -m "not liveness" tests notebooks $(NBVAL); rc=$$?; \
	echo "make test: $$([ $$rc = 0 ] && echo passed || echo FAILED) in $$(( $$(date +%s) - start )) s"; exit $$rc

liveness:  ## what each notebook shows is what it runs: every timing notebook at the smoke scale, unedited and with its shown code slowed (about 45 min)
	@start=$$(date +%s); \
	bash .ci/setup.sh $(PYTHON) && $(PY) -m pytest -q -m liveness tests/test_liveness.py; rc=$$?; \
	echo "make liveness: $$([ $$rc = 0 ] && echo passed || echo FAILED) in $$(( $$(date +%s) - start )) s"; exit $$rc

reproduce:  ## every notebook at SCALE (default workshop) into results/, each benchmark's figures from its notebook's, then results/REPORT.md (with the run times) and README's tables; the committed notebooks are left alone
	@start=$$(date +%s); \
	bash .ci/setup.sh $(PYTHON) && \
	FASTLOOPS_SCALE=$(SCALE) $(PY) -m fastloops_book.notebooks run --out $(RESULTS)/notebooks \
	    --html $(RESULTS)/html --times $(RESULTS)/notebook_times.json $(filter-out $(CONCLUSION),$(ALL_NB)); rc=$$?; \
	echo "[reproduce] the benchmarks' figures, from what the notebooks saved (elapsed $$(( $$(date +%s) - start )) s)"; \
	FASTLOOPS_SCALE=$(SCALE) $(PY) -m fastloops_book.bench all --saved || rc=1; \
	echo "[reproduce] the conclusion, after everything it reads"; \
	FASTLOOPS_SCALE=$(SCALE) $(PY) -m fastloops_book.notebooks run --out $(RESULTS)/notebooks \
	    --html $(RESULTS)/html --times $(RESULTS)/notebook_times.json $(CONCLUSION) || rc=1; \
	$(PY) -m fastloops_book.report --results $(RESULTS) --readme README.md || rc=1; \
	echo "make reproduce: $$([ $$rc = 0 ] && echo done || echo FAILED) in $$(( $$(date +%s) - start )) s; see $(RESULTS)/REPORT.md"; exit $$rc

notebooks:  ## re-execute the committed notebooks in place at the workshop scale (refreshes stored outputs and the cards' run times)
	@bash .ci/setup.sh $(PYTHON) && FASTLOOPS_SCALE=workshop $(PY) -m fastloops_book.notebooks run --inplace $(NB)

lab:  ## JupyterLab in notebooks/ on 127.0.0.1 (root too, offline); prints the URL to open
	@bash .ci/setup.sh $(PYTHON) && $(PY) -m fastloops_book.publish.lab

slides:  ## an offline reveal.js deck of one notebook: make slides NB=notebooks/07_dataloader_anatomy.ipynb
	@bash .ci/setup.sh $(PYTHON) && $(PY) -m fastloops_book.publish.deck $(or $(NB),$(error give NB=notebooks/NN_topic.ipynb)) --out $(RESULTS)/slides

site:  ## a browsable site of the executed notebooks (stored outputs, no re-run) in results/site
	@bash .ci/setup.sh $(PYTHON) && $(PY) -m fastloops_book.publish.site --out $(RESULTS)/site --results $(RESULTS)

student:  ## students' copies for a workshop in results/student: no outputs, each solution an empty cell
	@bash .ci/setup.sh $(PYTHON) && $(PY) -m fastloops_book.student --out $(RESULTS)/student

twins:  ## regenerate the text twins notebooks/py/NN_topic.py (jupytext percent scripts) for review
	@bash .ci/setup.sh $(PYTHON) && $(PY) -m fastloops_book.publish.twins write

slides-meta:  ## (re)write every notebook's slide metadata by the rules in book/fastloops_book/publish/slides.py
	@bash .ci/setup.sh $(PYTHON) && $(PY) -m fastloops_book.publish.slides tag $(NB)

bench:  ## one benchmark (executes its notebook): make bench NAME=loops [SCALE=...]
	@bash .ci/setup.sh $(PYTHON) && $(PY) -m fastloops_book.bench $(NAME) --scale $(SCALE)

gpu-check:  ## a GPU machine's check with its own torch, no network: the CUDA tests, then every notebook (solutions too) at the gpu scale into reports/gpu/<machine>/ and its archive (.venv's python once a set-up finished)
	PYTHONPATH=.$${PYTHONPATH:+:$$PYTHONPATH} $(if $(wildcard $(VENV)/.fastloops-installed),$(PY),$(PYTHON)) -m fastloops_book.gpu_check $(ARGS)

clean:  ## remove generated data and results (keeps .venv)
	rm -rf data $(RESULTS)
