"""libstdc++'s std::partial_sort, std::nth_element and std::sort (bits/stl_algo.h, bits/stl_heap.h), step for
step: the core's multinomial keeps the largest keys of a row with them, as PyTorch's topk does (csrc/ops/random.cpp,
top_keys), and where keys are equal only their exact steps give the same order. Each sorts a[first:last] in
place by `comp` (a strict weak order: comp(x, y) is "x goes before y")."""

_THRESHOLD = 16


def _push_heap(a, first, hole, top, value, comp):
    parent = (hole - 1) // 2
    while hole > top and comp(a[first + parent], value):
        a[first + hole] = a[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    a[first + hole] = value


def _adjust_heap(a, first, hole, length, value, comp):
    top, child = hole, hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if comp(a[first + child], a[first + child - 1]):
            child -= 1
        a[first + hole] = a[first + child]
        hole = child
    if length % 2 == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        a[first + hole] = a[first + child - 1]
        hole = child - 1
    _push_heap(a, first, hole, top, value, comp)


def _make_heap(a, first, last, comp):
    length = last - first
    for parent in range((length - 2) // 2, -1, -1) if length >= 2 else ():
        _adjust_heap(a, first, parent, length, a[first + parent], comp)


def _pop_heap(a, first, last, result, comp):
    value = a[result]
    a[result] = a[first]
    _adjust_heap(a, first, 0, last - first, value, comp)


def _heap_select(a, first, middle, last, comp):
    _make_heap(a, first, middle, comp)
    for i in range(middle, last):
        if comp(a[i], a[first]):
            _pop_heap(a, first, middle, i, comp)


def _sort_heap(a, first, last, comp):
    while last - first > 1:
        last -= 1
        _pop_heap(a, first, last, last, comp)


def partial_sort(a, first, middle, last, comp):
    _heap_select(a, first, middle, last, comp)
    _sort_heap(a, first, middle, comp)


def _move_median_to_first(a, result, x, y, z, comp):
    if comp(a[x], a[y]):
        pick = y if comp(a[y], a[z]) else z if comp(a[x], a[z]) else x
    else:
        pick = x if comp(a[x], a[z]) else z if comp(a[y], a[z]) else y
    a[result], a[pick] = a[pick], a[result]


def _unguarded_partition_pivot(a, first, last, comp):
    _move_median_to_first(a, first, first + 1, first + (last - first) // 2, last - 1, comp)
    pivot, lo, hi = a[first], first + 1, last
    while True:
        while comp(a[lo], pivot):
            lo += 1
        hi -= 1
        while comp(pivot, a[hi]):
            hi -= 1
        if not lo < hi:
            return lo
        a[lo], a[hi] = a[hi], a[lo]
        lo += 1


def _unguarded_linear_insert(a, last, comp):
    value = a[last]
    while comp(value, a[last - 1]):
        a[last] = a[last - 1]
        last -= 1
    a[last] = value


def _insertion_sort(a, first, last, comp):
    for i in range(first + 1, last):
        if comp(a[i], a[first]):
            value = a[i]
            a[first + 1 : i + 1] = a[first:i]
            a[first] = value
        else:
            _unguarded_linear_insert(a, i, comp)


def nth_element(a, first, nth, last, comp):
    if first == last or nth == last:
        return
    depth = 2 * ((last - first).bit_length() - 1)
    while last - first > 3:
        if depth == 0:
            _heap_select(a, first, nth + 1, last, comp)
            a[first], a[nth] = a[nth], a[first]
            return
        depth -= 1
        cut = _unguarded_partition_pivot(a, first, last, comp)
        if cut <= nth:
            first = cut
        else:
            last = cut
    _insertion_sort(a, first, last, comp)


def _introsort_loop(a, first, last, depth, comp):
    while last - first > _THRESHOLD:
        if depth == 0:
            partial_sort(a, first, last, last, comp)
            return
        depth -= 1
        cut = _unguarded_partition_pivot(a, first, last, comp)
        _introsort_loop(a, cut, last, depth, comp)
        last = cut


def sort(a, first, last, comp):
    if last - first < 1:
        return
    _introsort_loop(a, first, last, 2 * ((last - first).bit_length() - 1), comp)
    if last - first > _THRESHOLD:
        _insertion_sort(a, first, first + _THRESHOLD, comp)
        for i in range(first + _THRESHOLD, last):
            _unguarded_linear_insert(a, i, comp)
    else:
        _insertion_sort(a, first, last, comp)
