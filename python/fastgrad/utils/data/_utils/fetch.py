"""Fetchers: what the DataLoader does with one index (or batch of indices) from its sampler, in the
main process or in a worker."""


class _MapDatasetFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last

    def fetch(self, possibly_batched_index):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[possibly_batched_index])
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems:  # a dataset may fetch a whole batch at once
            return self.collate_fn(getitems(possibly_batched_index))
        return self.collate_fn([self.dataset[i] for i in possibly_batched_index])


class _IterableDatasetFetcher(_MapDatasetFetcher):
    """Takes the next sample (or the next batch's worth) of one pass over the dataset; raises
    StopIteration at its end, or at a short last batch under drop_last."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        super().__init__(dataset, auto_collation, collate_fn, drop_last)
        self.dataset_iter = iter(dataset)
        self.ended = False

    def fetch(self, possibly_batched_index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        wanted = len(possibly_batched_index)
        data = []
        for sample in self.dataset_iter:
            data.append(sample)
            if len(data) == wanted:
                break
        else:
            self.ended = True
        if not data or (self.drop_last and len(data) < wanted):
            raise StopIteration
        return self.collate_fn(data)


class _DatasetKind:
    Map = 0
    Iterable = 1

    @staticmethod
    def create_fetcher(kind, dataset, auto_collation, collate_fn, drop_last):
        fetcher = _MapDatasetFetcher if kind == _DatasetKind.Map else _IterableDatasetFetcher
        return fetcher(dataset, auto_collation, collate_fn, drop_last)
