"""The exact search's checks over sections: schedule inference and cover inference, and which
sections a placement can have changed, so that each check looks at those only.

Both checks (see :mod:`srbench.planners._exact_search` for what they infer) read, per section, its
floor, its unplaced bytes and the lowest start each unplaced buffer there can still take. A
placement changes those in few sections: the ones the placed buffer lives in (floor and unplaced
bytes), the ones holding a buffer it raised (starts, and the floors lifted to them), and the ones
holding a buffer the canonical order has now left behind (its lowest start is just above the last
placement). Every other section is as it was when the parent node passed the same checks, so it
passes again: the checks here look only at the changed sections, and the answer is the one a scan
of every section gives (the first failing section in scope, in section order).

The sections with a buffer left behind are the ones whose floor is at or below the offset just
placed (a section's floor is the lowest minimum offset of its unplaced buffers): a min segment tree
over the floors of the sections holding unplaced bytes (:func:`set_open_floor`) lists them in
O(log S) each (:func:`listed_open`), where a scan of every section cost O(S) per placement (at
10,000 tensors, 20,000 sections, most of a step's time in cover inference).

One change is not a placement's own: the starts start propagation proves are kept for the subtree
(``srbench.planners._exact_search._keep_raised_starts``), raising the floors of the raised buffers'
sections after the checks passed. Propagation itself applies Jackson's rule to every section it
raised a buffer in, with the starts as kept, when its queue empties within its visits; sections it
did not reach are checked when a later placement changes them, where a scan would refuse at the
next placement. So with kept starts, checking the changed sections only can search on below a
node a scan would end: never a packing lost, possibly steps more (the equivalence test, the
brute-force tests and the search at 10,000 tensors are unchanged by it, README "Kept starts").
"""

from __future__ import annotations

import numpy as np

from srbench.planners._compiled import njit

INFINITY = np.iinfo(np.int64).max // 4


@njit(cache=True)
def lowest_start(min_offset, rank, key_offset, key_rank, lift):
    """The lowest offset an unplaced buffer of minimum offset ``min_offset`` and rank ``rank``
    can still take: that offset, or, when the canonical order has left the buffer behind (it
    comes before the last placement, ``key_offset`` and ``key_rank``), ``lift`` above the last
    placement. Such a buffer can be placed only once a later placement raises it, and later
    placements come at ``key_offset`` or above: one of its unplaced neighbours in time, placed
    there, lifts it to that offset plus the neighbour's size at least (all in units of the
    alignment). So ``lift`` is the smallest size among the buffer's neighbours; it was the
    alignment, which on instances of 1-byte alignment and sizes in multiples of 1 KiB said
    nothing. Scalars only: a
    numba function taking arrays is not inlined, and a call per buffer in schedule inference's
    loop, taking the arrays, made the search at 10,000 tensors a third slower (2.30 -> 2.75 s)."""
    if min_offset < key_offset or (min_offset == key_offset and rank < key_rank):
        return key_offset + lift
    return min_offset


@njit(cache=True)
def set_open_floor(open_floor, floor, total, section):
    """Set leaf ``section`` of the min segment tree ``open_floor`` to the section's floor when it
    holds unplaced bytes (``total``, a max segment tree of the same shape), else to INFINITY, and
    the minima above it."""
    half = open_floor.shape[0] // 2
    node = half + section
    open_floor[node] = floor[section] if total[node] > 0 else INFINITY
    node >>= 1
    while node >= 1:
        lowest = min(open_floor[2 * node], open_floor[2 * node + 1])
        if open_floor[node] == lowest:
            break  # the minima above are unchanged too
        open_floor[node] = lowest
        node >>= 1


@njit(cache=True)
def _next_open(open_floor, start, bound):
    """The first section at or after ``start`` whose leaf in ``open_floor`` is at most ``bound``
    (the tree's width when none is)."""
    half = open_floor.shape[0] // 2
    node = half + start
    if open_floor[node] <= bound:
        return start
    while node > 1:
        if node & 1 == 0 and open_floor[node + 1] <= bound:
            node += 1
            while node < half:
                node = 2 * node if open_floor[2 * node] <= bound else 2 * node + 1
            return node - half
        node >>= 1
    return half


@njit(cache=True)
def listed_open(open_floor, lo, hi, bound, out):
    """Write to ``out``, in order, the sections in ``lo .. hi - 1`` holding unplaced bytes at a
    floor of at most ``bound``; returns how many."""
    count = 0
    section = _next_open(open_floor, lo, bound) if lo < hi else hi
    while section < hi:
        out[count] = section
        count += 1
        section = _next_open(open_floor, section + 1, bound) if section + 1 < hi else hi
    return count


@njit(cache=True)
def _sorted_union(first, first_count, second, second_count, out):
    """The union of two ascending lists of sections, ascending and without repeats, into ``out``;
    returns its length."""
    count = 0
    i = j = 0
    while i < first_count or j < second_count:
        if j >= second_count or (i < first_count and first[i] <= second[j]):
            value = first[i]
            i += 1
        else:
            value = second[j]
            j += 1
        if count == 0 or out[count - 1] != value:
            out[count] = value
            count += 1
    return count


@njit(cache=True)
def changed_sections(open_floor, incremental, floor, mark, stamp, scratch, affected, lo, hi, key_offset, listed, spare,
                     out):  # fmt: skip
    """The sections in scope whose schedule a placement at ``key_offset`` may have changed, in
    order, into ``out``: the ``affected`` ones listed in ``scratch`` (and marked with ``stamp``
    in ``mark``: a buffer there was raised), and those at a floor at most ``key_offset`` (a
    buffer there may have been left behind). Returns how many, and how many of the latter holding
    unplaced bytes, which stay in ``listed`` for cover inference; ``incremental``: read them from
    ``open_floor``, else scan the scope (and list none). ``spare``: scratch as long as ``out``."""
    if not incremental:
        count = 0
        for section in range(lo, hi):
            if floor[section] <= key_offset or mark[section] == stamp:
                out[count] = section
                count += 1
        return count, 0
    listed_count = listed_open(open_floor, lo, hi, key_offset, listed)
    raised = 0
    for index in range(affected):
        section = scratch[index]
        if lo <= section < hi:
            spare[raised] = section
            raised += 1
    spare[:raised].sort()
    return _sorted_union(listed, listed_count, spare, raised, out), listed_count


@njit(cache=True)
def schedulable(member_ptr, member_idx, size, lift, top, capacity, low_capacity, offset, min_offset, floor, rank,
                key_offset, key_rank, release, jobs, section):  # fmt: skip
    """Whether the unplaced buffers of ``section`` fit between its floor and their tops (the unit
    each must end by, :meth:`srbench.planners._exact_search.Partition.tops`; the section's highest
    and lowest tops are ``capacity`` and ``low_capacity``), each starting no lower than it still
    can: its minimum offset, or its ``lift`` above the last placement (``key_offset``,
    ``key_rank``) when the canonical order has left it behind (it must be raised by a later
    placement, see :func:`lowest_start`).

    Within one section every pair of buffers overlaps in time, so their offsets are disjoint
    intervals: a one-machine schedule with release dates (the lowest starts). With a common
    deadline (every top the same: the capacity, at alignment 1), taking them in order of release
    date and stacking each as low as it may go is optimal (Jackson's rule; the makespan is the
    largest, over each release date h, of h plus the sizes released at h or later), so this is
    the exact answer for the section on its own: it counts the bytes left empty below buffers
    that cannot start lower, where section inference counts only the buffers' total above the
    lowest start. At an alignment the tops are q and q + 1 units, and only the topmost buffer of
    a stack can end at q + 1 (every other ends by its start, below q + 1 by a unit at least):
    when Jackson's makespan is q + 1, the section fits exactly when some buffer of top q + 1,
    put last above the others in Jackson's order, still ends by it, which is tried for each (a
    buffer that cannot end by its own top, last or not, fails every such try)."""
    count = 0
    total = 0
    latest = 0
    for position in range(member_ptr[section], member_ptr[section + 1]):
        other = member_idx[position]
        if offset[other] >= 0:
            continue
        start = lowest_start(min_offset[other], rank[other], key_offset, key_rank, lift[other])
        release[count] = start
        jobs[count] = other
        count += 1
        total += size[other]
        latest = max(latest, start)
    if latest + total <= low_capacity[section]:  # even the latest start leaves room for all of them
        return True
    for index in range(1, count):  # insertion sort by release date: a section holds few buffers
        start, job = release[index], jobs[index]
        at = index
        while at > 0 and release[at - 1] > start:
            release[at] = release[at - 1]
            jobs[at] = jobs[at - 1]
            at -= 1
        release[at] = start
        jobs[at] = job
    makespan = floor[section]
    for index in range(count):
        makespan = max(makespan, release[index]) + size[jobs[index]]
    if makespan <= low_capacity[section]:
        return True
    if makespan > capacity[section]:
        return False
    for last in range(count):  # makespan q + 1: one of top q + 1 must end the stack
        job = jobs[last]
        if top[job] >= makespan and max(_stacked_top(floor[section], size, release, jobs, count, last),
                                        release[last]) + size[job] <= top[job]:  # fmt: skip
            return True
    return False


@njit(cache=True)
def _stacked_top(floor, size, release, jobs, count, skip):
    """Where the buffers ``jobs[:count]`` but the one at ``skip``, stacked in that order above
    ``floor``, each no lower than its ``release``, end."""
    reached = floor
    for index in range(count):
        if index != skip:
            reached = max(reached, release[index]) + size[jobs[index]]
    return reached


@njit(cache=True)
def unschedulable_section(member_ptr, member_idx, size, lift, top, capacity, low_capacity, offset, min_offset, floor,
                          rank, key_offset, key_rank, release, jobs, sections, count):  # fmt: skip
    """Schedule inference: the first of ``sections[:count]`` (the ones this placement may have
    changed, :func:`changed_sections`) that can no longer hold its unplaced buffers (see
    :func:`schedulable`), or -1. The others are as they were at the parent, which passed (a
    section the placed buffer lives in and none was raised in lost a buffer and kept its starts:
    it passes as before)."""
    for index in range(count):
        section = sections[index]
        if not schedulable(member_ptr, member_idx, size, lift, top, capacity, low_capacity, offset, min_offset, floor,
                           rank, key_offset, key_rank, release, jobs, section):  # fmt: skip
            return section
    return -1


@njit(cache=True)
def _tight_slack(floor, unplaced, capacity, smallest):
    """The bytes a section at ``floor`` holding ``unplaced`` bytes has to spare when fewer than
    ``smallest`` (a tight section), else -1."""
    slack = capacity - floor - unplaced  # the section's capacity (the largest top there)
    return slack if unplaced > 0 and slack < smallest else -1


@njit(cache=True)
def _uncovered_run(section_hi, member_ptr, member_idx, by_start, start_ptr, lift, smallest, offset, min_offset,
                   floor, total, rank, capacity, key_offset, key_rank, reach, start, end, loosest):  # fmt: skip
    """Cover inference on the run of sections ``start .. end - 1`` (one floor), ``loosest`` the
    largest slack of its tight sections (-1: none): the section where no cover of its tight
    sections reaches past, or -1 (see :func:`uncoverable_section`)."""
    if loosest < 0:
        return -1
    half = total.shape[0] // 2
    level = floor[start]
    for section in range(start, end + 1):
        reach[section] = False
    reach[start] = True
    for section in range(start, end):
        if not reach[section]:
            continue
        slack = capacity[section] - level - total[half + section]
        tight = total[half + section] > 0 and slack < smallest
        if not tight:
            reach[section + 1] = True  # may stay uncovered
            slack = loosest
        # Buffers that may start within the slack and whose span, cut to the run, begins here.
        if section == start:
            begin, stop, buffers = member_ptr[section], member_ptr[section + 1], member_idx
        else:
            begin, stop, buffers = start_ptr[section], start_ptr[section + 1], by_start
        for position in range(begin, stop):
            other = buffers[position]
            if offset[other] >= 0:
                continue
            if lowest_start(min_offset[other], rank[other], key_offset, key_rank, lift[other]) <= level + slack:
                reach[min(section_hi[other], end)] = True
    if reach[end]:
        return -1
    # Blame the section where coverage broke off: the last one reached, tight.
    broke = start
    while reach[broke + 1]:
        broke += 1
    return broke


@njit(cache=True)
def _uncovered_around(section_hi, member_ptr, member_idx, by_start, start_ptr, lift, smallest, offset,
                      min_offset, floor, total, rank, capacity, key_offset, key_rank, reach, seed, lo,
                      hi):  # fmt: skip
    """Cover inference on the run of sections (within ``lo .. hi - 1``) holding ``seed``: the
    section where no cover reaches past, or -1; and the end of the run."""
    half = total.shape[0] // 2
    loosest = _tight_slack(floor[seed], total[half + seed], capacity[seed], smallest)
    start = seed
    while start > lo and floor[start - 1] == floor[seed]:
        start -= 1
        loosest = max(loosest, _tight_slack(floor[start], total[half + start], capacity[start], smallest))
    end = seed + 1
    while end < hi and floor[end] == floor[seed]:
        loosest = max(loosest, _tight_slack(floor[end], total[half + end], capacity[end], smallest))
        end += 1
    broke = _uncovered_run(section_hi, member_ptr, member_idx, by_start, start_ptr, lift, smallest, offset,
                           min_offset, floor, total, rank, capacity, key_offset, key_rank, reach, start, end,
                           loosest)  # fmt: skip
    return broke, end


@njit(cache=True)
def uncoverable_section(section_hi, member_ptr, member_idx, by_start, start_ptr, lift, smallest,
                        offset, min_offset, floor, total, rank, capacity, key_offset, key_rank, reach, lo,
                        hi):  # fmt: skip
    """Cover inference over every run of sections in scope (``lo .. hi - 1``).

    A section with fewer bytes to spare than the smallest buffer (its floor plus its unplaced
    bytes leave less than ``smallest`` below its ``capacity``, the largest top of its buffers:
    units at an alignment) has a lowest unplaced buffer starting
    within that slack of its floor, and no other unplaced buffer of the section starts there. In
    a run of sections at one floor, two such lowest buffers cannot overlap in time: the upper one
    would start at least the lower one's size, more than any such slack, above the floor. So the
    tight sections of each run must be covered by pairwise disjoint buffers that may start within
    the slack (their minimum offset, or their ``lift`` above the last placement when the
    canonical order has left them behind, is no higher): an interval cover on a line, decided left to right.
    Per-section inference sees each section alone, and passes a run where every section has a
    candidate but no set of disjoint ones covers them all. A candidate is checked against the
    slack of the section its span (cut to the run) begins in, or the largest slack of the run,
    which only weakens the check. Returns the section of a run where no cover reaches past, or
    -1. The search calls this where the scope is new (the root, a piece's first placement) and
    :func:`uncoverable_near` everywhere else."""
    start = lo
    while start < hi:
        broke, start = _uncovered_around(section_hi, member_ptr, member_idx, by_start, start_ptr, lift, smallest,
                                         offset, min_offset, floor, total, rank, capacity, key_offset, key_rank, reach,
                                         start, lo, hi)  # fmt: skip
        if broke >= 0:
            return broke
    return -1


@njit(cache=True)
def _add_seed(section, lo, hi, seen, stamp, out, count):
    """Append ``section`` to ``out[:count]`` if in scope and not there yet; returns the count."""
    if lo <= section < hi and seen[section] != stamp:
        seen[section] = stamp
        out[count] = section
        count += 1
    return count


@njit(cache=True)
def cover_seeds(section_trail, trail_from, trail_to, scratch, affected, listed, listed_count, floor, parent_key,
                smallest, lo, hi, seen, stamp, out):  # fmt: skip
    """The sections in scope whose run cover inference must check again after a placement, in
    order, into ``out`` (returns how many; ``seen`` marks them with ``stamp``):

    * the sections whose floor moved (``section_trail[0, trail_from:trail_to]``: the placed
      buffer's, and those lifted) and their neighbours, since a run may have grown, shrunk or
      split there;
    * the ``affected`` ones listed in ``scratch``, where a buffer was raised;
    * of the ``listed`` ones (unplaced bytes at a floor at most the offset just placed: a buffer
      there may have been left behind by the canonical order), those with a floor above
      ``parent_key`` (the offset the parent placed at) less ``smallest``. A candidate counts
      for a run at floor L when its lowest start is below L + ``smallest``; a buffer left behind
      now starts just above this placement, and before it started at its minimum offset or just
      above the parent's placement, both at least ``parent_key`` and at least L: so if L is at
      most ``parent_key`` less ``smallest``, it counted neither before nor now."""
    count = 0
    for position in range(trail_from, trail_to):
        section = section_trail[0, position]
        for near in range(section - 1, section + 2):
            count = _add_seed(near, lo, hi, seen, stamp, out, count)
    for index in range(affected):
        count = _add_seed(scratch[index], lo, hi, seen, stamp, out, count)
    for index in range(listed_count):
        section = listed[index]
        if floor[section] > parent_key - smallest:
            count = _add_seed(section, lo, hi, seen, stamp, out, count)
    out[:count].sort()
    return count


@njit(cache=True)
def uncoverable_near(section_hi, member_ptr, member_idx, by_start, start_ptr, lift, smallest, offset, min_offset,
                     floor, total, rank, capacity, key_offset, key_rank, reach, seeds, count, lo,
                     hi):  # fmt: skip
    """Cover inference (:func:`uncoverable_section`) on the runs holding ``seeds[:count]``
    (ascending, :func:`cover_seeds`): every other run of the scope is as it was when the parent
    passed, so this returns what the scan of every run would, the first failing section in scope."""
    checked = lo  # the runs below this were checked
    for index in range(count):
        if seeds[index] >= checked:
            broke, checked = _uncovered_around(section_hi, member_ptr, member_idx, by_start, start_ptr, lift,
                                               smallest, offset, min_offset, floor, total, rank, capacity, key_offset,
                                               key_rank, reach, seeds[index], lo, hi)  # fmt: skip
            if broke >= 0:
                return broke
    return -1


@njit(cache=True)
def _sort_by(keys, jobs, count):
    """Insertion sort of ``jobs[:count]`` by ``keys[job]`` (a section holds few buffers)."""
    for index in range(1, count):
        job = jobs[index]
        at = index
        while at > 0 and keys[jobs[at - 1]] > keys[job]:
            jobs[at] = jobs[at - 1]
            at -= 1
        jobs[at] = job


@njit(cache=True)
def unpropagatable_section(member_ptr, member_idx, section_lo, section_hi, by_start, start_ptr, size, lift, top,
                           capacity, offset, min_offset, floor, total, rank, key_offset, key_rank, release, finish,
                           fresh, stamp, jobs, by_finish, queue, queued, seeds, seed_count, lo, hi,
                           limit, noted, persist):  # fmt: skip
    """Start propagation: the first section found that cannot hold its unplaced buffers once their
    lowest starts are raised by what the other sections they live in allow, or -1; and how many
    buffers it raised, listed in ``persist`` (their raised starts in ``release``), which the search
    keeps for the subtree where nothing failed (``srbench.planners._exact_search._keep_raised_starts``).

    In a section whose unplaced buffers total ``T`` bytes, a buffer ``b`` at offset ``o`` has
    every other buffer of the section either wholly below ``o`` or above ``b``; one whose lowest
    start plus size passes ``o`` cannot be below, so ``o + T`` less the sizes of the others that
    can end by ``o`` must fit the section's ``capacity`` (the largest top of its buffers), and
    ``o`` plus ``b``'s size its own ``top``. The least such ``o`` at or above ``b``'s lowest start
    (:func:`lowest_start`) is a lower bound on ``b``'s offset, so on its start in every section
    it lives in: Jackson's rule there (:func:`schedulable`) may then fail where it passed with the
    lower start. Each section on its own was exact already; this is what couples sections at
    different floors, through the buffers they share (the bounds propagation of scheduling's
    edge-finding family, here with one machine per section and a common deadline). Sound: every
    bound holds in every packing below the node.

    Starts from the sections ``seeds[:seed_count]`` and follows each raised buffer to its other
    sections, visiting at most ``limit`` sections. ``release`` and ``finish`` (one per buffer) hold
    the raised starts and their ends of the buffers whose entry in ``fresh`` is ``stamp``, a number
    no earlier call used: a buffer's start is read where its first section is visited, so a call
    costs what it visits, not the partition's size (at 10,000 tensors, reading every start at
    every placement would cost more than the rest of the step). ``jobs`` and ``by_finish`` (one
    per buffer), ``queue`` and ``queued`` (one per section and one more) are scratch; ``queued`` is
    left all False; ``noted`` (one per buffer) marks with ``stamp`` the buffers listed in ``persist``."""
    half = total.shape[0] // 2
    head = 0
    tail = 0
    for index in range(seed_count):
        section = seeds[index]
        if not queued[section]:
            queued[section] = True
            queue[tail % queue.shape[0]] = section
            tail += 1
    failing = -1
    persisted = 0
    while head < tail and head < limit:
        section = queue[head % queue.shape[0]]
        head += 1
        queued[section] = False
        unplaced = total[half + section]
        if unplaced == 0:
            continue
        count = 0
        latest = 0
        for position in range(member_ptr[section], member_ptr[section + 1]):
            other = member_idx[position]
            if offset[other] < 0:
                if fresh[other] != stamp:  # first met in this call: its lowest start
                    fresh[other] = stamp
                    release[other] = lowest_start(min_offset[other], rank[other], key_offset, key_rank, lift[other])
                    finish[other] = release[other] + size[other]
                jobs[count] = other
                count += 1
                latest = max(latest, release[other])
        if latest + unplaced <= capacity[section]:
            continue
        by_finish[:count] = jobs[:count]
        _sort_by(finish, by_finish, count)  # the least offset is found scanning by end, ascending
        for index in range(count):
            buffer = jobs[index]
            if release[buffer] + unplaced <= capacity[section]:
                continue
            below = 0
            least = -1
            for other_index in range(count):
                other = by_finish[other_index]
                if other == buffer:
                    continue
                below += size[other]
                candidate = max(finish[other], release[buffer])
                if candidate + unplaced - capacity[section] <= below:
                    least = candidate
                    break
            if least < 0 or least + size[buffer] > top[buffer]:
                failing = section
                break
            if least > release[buffer]:
                if noted[buffer] != stamp:
                    noted[buffer] = stamp
                    persist[persisted] = buffer
                    persisted += 1
                release[buffer] = least
                finish[buffer] = least + size[buffer]
                at = 0
                while by_finish[at] != buffer:
                    at += 1
                while at + 1 < count and finish[by_finish[at + 1]] < finish[buffer]:  # keep the order by end
                    by_finish[at] = by_finish[at + 1]
                    at += 1
                by_finish[at] = buffer
                for other_section in range(max(section_lo[buffer], lo), min(section_hi[buffer], hi)):
                    if not queued[other_section]:
                        queued[other_section] = True
                        queue[tail % queue.shape[0]] = other_section
                        tail += 1
        if failing >= 0:
            break
        # Jackson's rule with the starts as raised so far.
        _sort_by(release, jobs, count)
        reached = floor[section]
        for index in range(count):
            reached = max(reached, release[jobs[index]]) + size[jobs[index]]
        if reached > capacity[section]:
            failing = section
            break
    while head < tail:
        queued[queue[head % queue.shape[0]]] = False
        head += 1
    return failing, persisted
