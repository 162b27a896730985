"""The data path after the data: epoch order, row gathers, the batched loader, transforms, prefetchers, devices."""
