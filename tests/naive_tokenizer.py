"""Slow, obviously correct pure-Python references for statemix.tokenizer (used by the tests only).

Each function follows the definition in statemix/tokenizer/ docstrings literally, with no data
structure beyond lists and dicts, so a disagreement points at the fast kernels.
"""

from __future__ import annotations

# byte classes and pre-split rule, restated from the definition
LETTER, DIGIT, SPACE, OTHER = range(4)


def byte_class(b: int) -> int:
    if b >= 128 or (65 <= b <= 90) or (97 <= b <= 122):
        return LETTER
    if 48 <= b <= 57:
        return DIGIT
    if b == 32:
        return SPACE
    return OTHER


def may_merge_words(last_byte: int, first_byte: int) -> bool:
    """SPLIT_WORDS: may a token ending in ``last_byte`` join one starting with ``first_byte``?"""
    x, y = byte_class(last_byte), byte_class(first_byte)
    return x == y or (x == SPACE and y in (LETTER, DIGIT))


def token_bytes(merges: list[tuple[int, int]]) -> list[bytes]:
    """The bytes of every token id."""
    table = [bytes([i]) for i in range(256)]
    for left, right in merges:
        table.append(table[left] + table[right])
    return table


def naive_encode(merges: list[tuple[int, int]], data: bytes) -> list[int]:
    """Repeatedly merge the adjacent pair of lowest rank, leftmost occurrence first."""
    rank = {pair: r for r, pair in enumerate(merges)}
    tokens = list(data)
    while True:
        best = None
        for i in range(len(tokens) - 1):
            r = rank.get((tokens[i], tokens[i + 1]))
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            return tokens
        r, i = best
        tokens[i : i + 2] = [256 + r]


def naive_decode(merges: list[tuple[int, int]], ids: list[int]) -> bytes:
    table = token_bytes(merges)
    return b"".join(table[i] for i in ids)


def naive_train(data: bytes, n_merges: int, min_count: int = 2, split_words: bool = False,
                max_token_bytes: int = 256, base: list[tuple[int, int]] | None = None
                ) -> list[tuple[int, int]]:
    """Recount all adjacent pairs each step; merge the most frequent (ties: smallest pair) everywhere,
    left to right.  With ``base``, start from its encoding of ``data`` and return base + new merges."""
    merges: list[tuple[int, int]] = list(base or [])
    tokens = naive_encode(merges, data)
    table = token_bytes(merges)
    for _ in range(n_merges):
        counts: dict[tuple[int, int], int] = {}
        for a, b in zip(tokens, tokens[1:]):
            if split_words and not may_merge_words(table[a][-1], table[b][0]):
                continue
            if len(table[a]) + len(table[b]) > max_token_bytes:
                continue
            counts[(a, b)] = counts.get((a, b), 0) + 1
        if not counts:
            break
        pair = min(counts, key=lambda p: (-counts[p], p))
        if counts[pair] < min_count:
            break
        new = 256 + len(merges)
        merges.append(pair)
        table.append(table[pair[0]] + table[pair[1]])
        out = []
        i = 0
        while i < len(tokens):
            if i + 1 < len(tokens) and (tokens[i], tokens[i + 1]) == pair:
                out.append(new)
                i += 2
            else:
                out.append(tokens[i])
                i += 1
        tokens = out
    return merges


def naive_canonical_order(merges: list[tuple[int, int]], counts: list[int], first_id: int) -> list[tuple[int, int]]:
    """The canonical order of merges given in training order (the docstring of
    statemix.tokenizer.training.canonical_order, restated).

    Groups: consecutive merges whose counts have the same bit length of count squared (counts within a
    factor of sqrt(2)).  A group's candidates are the merges moved out of the group before it and its
    own; a candidate using the token of another candidate of the group moves on to the next group
    (after the last group, the moved merges form groups of their own until none is left).  The kept
    candidates, written with the new ids of their operands, are sorted by (left, right) and their
    tokens take the next new ids in that order.
    """
    groups: list[list[int]] = []
    for r, count in enumerate(counts):
        key = (count * count).bit_length()
        if groups and (counts[groups[-1][0]] ** 2).bit_length() == key:
            groups[-1].append(r)
        else:
            groups.append([r])
    new_id = {}  # token made by merge r (id first_id + r) -> its new id

    def renamed(token: int) -> int:
        return new_id.get(token, token)

    out: list[tuple[int, int]] = []
    moved: list[int] = []
    g = 0
    while g < len(groups) or moved:
        candidates = moved + (groups[g] if g < len(groups) else [])
        g += 1
        made = {first_id + r for r in candidates}
        moved = [r for r in candidates if merges[r][0] in made or merges[r][1] in made]
        kept = sorted((renamed(merges[r][0]), renamed(merges[r][1]), r) for r in candidates if r not in moved)
        for left, right, r in kept:
            new_id[first_id + r] = first_id + len(out)
            out.append((left, right))
    return out
