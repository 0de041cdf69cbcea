"""The text state's LETTERS, OPENER, NAME, TOKEN, PREVTOKEN, SENTENCE, EMPHASIS, RUNS, RUN_LENGTH, RUNS2
and SHAPE words and its next-word table (.bit.text) against a plain Python reference, and the contexts
built on them (.bit.contexts kinds 34-60)."""

from __future__ import annotations

import random

import numpy as np

from statemix._jit import kernel
from statemix.models.bit import contexts, text
from statemix.models.bit.contexts import context_hash

from test_hashing import reference_mix_hash


@kernel
def _text_states(data, st, aux, out):
    """The text state ``st`` after each byte of ``data`` (one row of TEXT_SIZE words per byte)."""
    c1 = c2 = np.int64(0)
    for i in range(data.shape[0]):
        byte = np.int64(data[i])
        text.text_update(st, 0, aux, i + 1, byte, c1, c2)
        c2, c1 = c1, byte
        for k in range(st.shape[0]):
            out[i, k] = st[k]


def reference_text_words(data: bytes) -> list[tuple[int, int, int]]:
    """(LETTERS, OPENER, NAME) after each byte, from the module docstring's definitions."""
    letters = opener = name = 0
    naming = in_word = False
    out = []
    for i, byte in enumerate(data):
        c1 = data[i - 1] if i >= 1 else 0
        c2 = data[i - 2] if i >= 2 else 0
        folded = byte | 32
        letter = ord("a") <= folded <= ord("z")
        if letter:
            if not in_word:
                opener = c1
            letters = ((letters << 5) | (folded - 96)) & 0x3FFFFFFF
            if naming:
                name = reference_mix_hash(name, folded)
        in_word = letter
        opens = (byte == ord("<") or (byte in b"[{" and c1 == byte)
                 or (byte == ord(";") and c1 == ord("t") and c2 == ord("l")))
        if opens:
            naming, name = True, byte
        elif naming and not letter and not (byte == ord("/") and c1 in b"<;"):
            naming = False
        out.append((letters, opener, name))
    return out


def test_letters_opener_and_name_match_the_reference():
    rng = random.Random(5)
    pieces = [b"<text xml:space=\"preserve\">", b"&lt;ref name=x&gt;", b"&lt;/ref&gt;", b"{{Cite web|url=a}}",
              b"[[Category:Greek]]", b"'''Alpha''' beta, gamma. ", b"</page>", b"(see [[b]])", b"2006-03-04 ",
              bytes(rng.randrange(256) for _ in range(40))]
    data = b"".join(rng.choice(pieces) for _ in range(300))
    assert text_words(data) == reference_text_words(data)


def text_words(data: bytes) -> list[tuple[int, int, int]]:
    """(LETTERS, OPENER, NAME) after each byte, from the kernel."""
    out = np.zeros((len(data), text.TEXT_SIZE), dtype=np.int64)
    st, aux = np.zeros(text.TEXT_SIZE, dtype=np.int64), np.zeros(text.AUX_SIZE, dtype=np.int32)
    _text_states(np.frombuffer(data, dtype=np.uint8), st, aux, out)
    return [(int(r[text.LETTERS]), int(r[text.OPENER]), int(r[text.NAME])) for r in out]


def reference_token_sentence_emphasis(data: bytes) -> list[tuple[int, int, int, int]]:
    """(TOKEN, SENTENCE, EMPHASIS, PREVTOKEN) after each byte, from the module docstring's definitions."""
    token = sentence = emphasis = quotes = before = 0
    in_word = False
    out = []
    for byte in data:
        letter = ord("a") <= byte | 32 <= ord("z")
        if in_word and not letter:
            sentence = min(sentence + 1, 15)
        in_word = letter
        if byte == ord("'"):
            quotes += 1
        else:
            emphasis ^= {2: 1, 3: 2, 5: 3}.get(quotes, 0)
            quotes = 0
            if byte == 10:
                emphasis = 0
        if byte in b".!?\n":
            sentence = 0
        if byte <= 32 and token:
            before = token
        token = reference_mix_hash(token, byte + 1) if byte > 32 else 0
        out.append((token, sentence, emphasis, before))
    return out


def reference_next_words(data: bytes) -> dict[int, int]:
    """The text state's table of the words that followed each word (slot -> entry) after ``data``."""
    word = last = 0
    table = {}
    for byte in data:
        folded = byte | 32
        if ord("a") <= folded <= ord("z"):
            word = reference_mix_hash(word, folded)
        elif word != 0:
            table[(last >> 48) & 0xFFFF] = word & 0x7FFFFFFF
            word, last = 0, word
    return table


def test_token_sentence_emphasis_and_next_words_match_the_reference():
    rng = random.Random(7)
    pieces = [b"The cat sat. ", b"Did it? ", b"Yes!\n", b"[[Category:Greek]] ", b"in 1987, ", b"a b c d e f g h ",
              b"x.y ", b"\t&lt;ref&gt;", b"''italic'' ", b"'''bold''' ", b"'''''both''''' ", b"it's ", b"''open\n",
              bytes(rng.randrange(256) for _ in range(30))]
    data = b"".join(rng.choice(pieces) for _ in range(300))
    out = np.zeros((len(data), text.TEXT_SIZE), dtype=np.int64)
    aux = np.zeros(text.AUX_SIZE, dtype=np.int32)
    _text_states(np.frombuffer(data, dtype=np.uint8), np.zeros(text.TEXT_SIZE, dtype=np.int64), aux, out)
    words = [(int(r[text.TOKEN]), int(r[text.SENTENCE]), int(r[text.EMPHASIS]), int(r[text.PREVTOKEN])) for r in out]
    assert words == reference_token_sentence_emphasis(data)
    assert len({w[3] for w in words}) > 20  # many tokens came before others
    assert max(w[1] for w in words) == 15 and {w[2] for w in words} == {0, 1, 2, 3}  # the cap, every emphasis
    table = reference_next_words(data)
    assert len(table) > 20 and {k: int(aux[text.NEXT_WORDS + k]) for k in table} == table
    assert np.count_nonzero(aux[text.NEXT_WORDS:]) == len(table)


def reference_class(byte: int) -> int:
    """A byte's class, from the text module docstring's list."""
    if byte >= 128:
        return 7
    if chr(byte).islower():
        return 2
    if chr(byte).isupper():
        return 3
    if chr(byte).isdigit():
        return 4
    if byte <= 32:
        return 1
    if chr(byte) in "<>&;[]{}|=":
        return 6
    return 5 if chr(byte) in "!\"#$%'()*+,-./:?@\\^_`~" else 0


def reference_runs(data: bytes) -> list[tuple[int, int, int, int]]:
    """(RUNS, RUN_LENGTH, RUNS2, SHAPE) after each byte: the classes of the last 8 runs of one class,
    the length of the last run (up to 255), the classes of the 8 runs before those, and the coarse
    classes (space or control, letter, digit, other) of the last 16 bytes."""
    all_runs, length, before, shape = [], 0, 0, 0  # class 0 ("other") before the data
    coarse = {1: 0, 2: 1, 3: 1, 4: 2}
    out = []
    for byte in data:
        byte_class = reference_class(byte)
        if byte_class != before:
            all_runs.append(byte_class)
            length = 0
        length, before = min(length + 1, 255), byte_class
        shape = ((shape << 2) | coarse.get(byte_class, 3)) & 0xFFFFFFFF
        last16 = ([0] * 16 + all_runs)[-16:]  # oldest first; runs before the data count as class 0
        runs = sum(c << (3 * i) for i, c in enumerate(reversed(last16[8:])))
        runs2 = sum(c << (3 * i) for i, c in enumerate(reversed(last16[:8])))
        out.append((runs, length, runs2, shape))
    return out


def test_class_runs_match_the_reference():
    rng = random.Random(11)
    pieces = [b"[[Greek]] ", b"The 1987 cat, ", b"&lt;ref&gt;", b"{{cite|a=b}}", b"\n\n", b" " * 300, b"x" * 260,
              b"\x7f\x7f\xe2\x80\x94", bytes(rng.randrange(256) for _ in range(30))]
    data = b"".join(rng.choice(pieces) for _ in range(300))
    out = np.zeros((len(data), text.TEXT_SIZE), dtype=np.int64)
    _text_states(np.frombuffer(data, dtype=np.uint8), np.zeros(text.TEXT_SIZE, dtype=np.int64),
                 np.zeros(text.AUX_SIZE, dtype=np.int32), out)
    runs = [(int(r[text.RUNS]), int(r[text.RUN_LENGTH]), int(r[text.RUNS2]), int(r[text.SHAPE])) for r in out]
    assert runs == reference_runs(data)
    assert max(r[1] for r in runs) == 255 and len({r[0] & 7 for r in runs}) == 8  # the cap, every class
    assert len({r[2] >> 21 for r in runs}) == 8 and len({r[3] & 3 for r in runs}) == 4  # RUNS2, SHAPE full
    assert {reference_class(b) for b in range(256)} == set(range(8))
    assert [reference_class(b) for b in range(256)] == [text.char_class.py_func(b) for b in range(256)]


def _name_after(data: bytes) -> int:
    return text_words(data)[-1][2]


def test_names_of_markup_constructs():
    # an escaped tag and its closing tag share their name; the name outlives the construct
    assert _name_after(b"x &lt;ref") == _name_after(b"x &lt;/ref") == _name_after(b"&lt;ref name=a&gt; some words")
    assert _name_after(b"x &lt;ref") not in (0, _name_after(b"x &lt;"), _name_after(b"x &lt;re"))
    assert _name_after(b"<Text") == _name_after(b"<text") != _name_after(b"&lt;text")
    assert len({_name_after(b"{{cite"), _name_after(b"[[cite"), _name_after(b"<cite"), _name_after(b"{cite")}) == 4
    assert text_words(b"big [[cat")[-1][1] == ord("[")  # the byte before the word


@kernel
def _hashes(kind, c4, words, st, aux, hist, positions, out):
    """The hash of context ``kind`` for each row of text state ``words`` (with ``c4`` and the next byte's
    position from the same row of ``c4`` and ``positions``)."""
    for i in range(words.shape[0]):
        for k in range(st.shape[0]):
            st[k] = words[i, k]
        out[i] = context_hash(kind, c4[i], np.int64(0), st, 0, 0, 0, aux, hist, np.int64(15), positions[i])


def test_the_text_state_contexts_read_their_words():
    # each context's hash against its definition (.bit.contexts' table), inside a word and between words
    last = 0x123456789ABCDEF  # the last word's hash (its top 16 bits pick its next-word entry: 0x0123)
    words = np.zeros((2, text.TEXT_SIZE), dtype=np.int64)
    words[:, text.WORD0] = (123456789, 0)
    words[:, text.WORD1] = last
    words[:, text.LETTERS], words[:, text.OPENER], words[:, text.NAME] = 0x1234567, 91, 5555
    words[:, text.MARKUP] = 0x24  # in [[...]], bracket depth 2
    words[:, text.TOKEN], words[:, text.SENTENCE], words[:, text.EMPHASIS] = 777, 3, 2
    aux = np.arange(text.AUX_SIZE, dtype=np.int32) * 7
    followed = int(aux[text.NEXT_WORDS + 0x0123])
    words[:, text.CLASSES] = (0o1222, 0o2221)  # three letters (word position 2); a space (8 + class of c1)
    c4 = np.array([0x61626364, 0x20616263], dtype=np.int64)
    mask = (1 << 64) - 1

    def add(a: int, b: int) -> int:
        v = (a + b) & mask
        return v - (1 << 64) if v >> 63 else v

    expected = {
        contexts.IDS["letters"]: [reference_mix_hash(0x1234567, 50 << 40)] * 2,
        contexts.IDS["word opener"]: [reference_mix_hash(add(123456789, 91), 52 << 40),
                                      reference_mix_hash(add(last, 0x6263), 51 << 40)],
        contexts.IDS["markup name"]: [reference_mix_hash(add(5555, 123456789), 54 << 40),
                                      reference_mix_hash(add(5555, add(last, 0x63)), 55 << 40)],
        contexts.IDS["word in markup"]: [reference_mix_hash(add(123456789, (0x24 << 8) | 0x64), 56 << 40),
                                         reference_mix_hash(add(last, (0x24 << 8) | 0x63), 56 << 40)],
        contexts.IDS["name position"]: [reference_mix_hash(add(5555, (2 << 8) | 0x64), 57 << 40),
                                        reference_mix_hash(add(5555, ((8 + 2) << 8) | 0x63), 57 << 40)],
        contexts.IDS["last word"]: [reference_mix_hash(add(last, 0x64), 58 << 40),
                                    reference_mix_hash(add(last, 0x63), 58 << 40)],
        contexts.IDS["token"]: [reference_mix_hash(777, 59 << 40)] * 2,
        contexts.IDS["sentence"]: [reference_mix_hash(add(123456789, (3 << 8) | 0x64), 60 << 40),
                                   reference_mix_hash((3 << 8) | 0x63, 60 << 40)],
        contexts.IDS["next word"]: [
            reference_mix_hash(add(followed, reference_mix_hash(123456789, 11 << 40)), 61 << 40),
            reference_mix_hash(add(followed, reference_mix_hash(0x63, 11 << 40)), 61 << 40)],
        contexts.IDS["emphasis"]: [reference_mix_hash(add(123456789, (2 << 8) | 0x64), 62 << 40),
                                   reference_mix_hash((2 << 8) | 0x63, 62 << 40)],
    }
    for kind, hashes in expected.items():
        out = np.zeros(2, dtype=np.int64)
        _hashes(kind, c4, words, np.zeros(text.TEXT_SIZE, dtype=np.int64), aux, np.zeros(16, dtype=np.uint8),
                np.zeros(2, dtype=np.int64), out)
        assert out.tolist() == hashes, contexts.NAMES[kind]


def test_the_shape_contexts_read_their_words_and_the_line():
    # kinds 44-60 against their definitions (.bit.contexts' table): in a line whose first byte is
    # 0x2A (the history's byte at the line's start, 0x13 = 3 mod 16), and right after a newline (no
    # byte of the line yet: 0)
    words = np.zeros((2, text.TEXT_SIZE), dtype=np.int64)
    words[:, text.WORD0], words[:, text.WORD1] = 123456789, 0x123456789ABCDEF
    words[:, text.MARKUP], words[:, text.CLASSES] = 0x24, 0o12223456
    words[:, text.RUNS], words[:, text.RUN_LENGTH] = 0o7654321, (5, 2)
    words[:, text.LINE] = 0x13
    words[:, text.RUNS2], words[:, text.SHAPE] = 0o1234567, 0xE4E4E4E4
    words[:, text.TOKEN], words[:, text.PREVTOKEN], words[:, text.WORD2] = 77, -5, 0x51
    positions = np.array([0x18, 0x13], dtype=np.int64)
    hist = np.zeros(16, dtype=np.uint8)
    hist[3] = 0x2A
    c4 = np.full(2, 0x61626364, dtype=np.int64)
    mask = (1 << 64) - 1

    def add(a: int, b: int) -> int:
        v = (a + b) & mask
        return v - (1 << 64) if v >> 63 else v

    runs, classes = 0o7654321, 0o12223456
    word_pair = add(add(123456789, classes & 0x1FF), reference_mix_hash(0x123456789ABCDEF, 11 << 40))
    expected = {
        contexts.IDS["class runs"]: [reference_mix_hash((runs << 10) | (3 << 8) | 0x64, 63 << 40),
                                     reference_mix_hash((runs << 10) | (2 << 8) | 0x64, 63 << 40)],
        contexts.IDS["runs order 2"]: [
            reference_mix_hash(add(reference_mix_hash(runs, 11 << 40), 0x6364), 64 << 40)] * 2,
        contexts.IDS["classes order 2"]: [
            reference_mix_hash(add(reference_mix_hash(classes, 11 << 40), 0x6364), 65 << 40)] * 2,
        contexts.IDS["line and markup"]: [reference_mix_hash((0x2A << 24) | (0x24 << 16) | 0x6364, 66 << 40),
                                          reference_mix_hash((0x24 << 16) | 0x6364, 66 << 40)],
        contexts.IDS["classes and last word"]: [reference_mix_hash(add(0x123456789ABCDEF, classes), 67 << 40)] * 2,
        contexts.IDS["line and word"]: [reference_mix_hash(add(123456789, (0x2A << 8) | 0x64), 68 << 40),
                                        reference_mix_hash(add(123456789, 0x64), 68 << 40)],
        contexts.IDS["markup order 3"]: [reference_mix_hash((0x24 << 24) | 0x626364, 69 << 40)] * 2,
        contexts.IDS["line and classes"]: [reference_mix_hash((classes << 16) | (0x2A << 8) | 0x64, 70 << 40),
                                           reference_mix_hash((classes << 16) | 0x64, 70 << 40)],
        contexts.IDS["runs and last word"]: [reference_mix_hash(add(0x123456789ABCDEF, runs), 71 << 40)] * 2,
        contexts.IDS["cased word pair"]: [reference_mix_hash(word_pair, 72 << 40)] * 2,
        contexts.IDS["shape order 2"]: [
            reference_mix_hash(add(reference_mix_hash(0xE4E4E4E4, 11 << 40), 0x6364), 73 << 40)] * 2,
        contexts.IDS["runs order 3"]: [
            reference_mix_hash(add(reference_mix_hash(runs, 11 << 40), 0x626364), 74 << 40)] * 2,
        contexts.IDS["sixteen runs"]: [
            reference_mix_hash(add(reference_mix_hash(0o1234567, 11 << 40), (runs << 8) | 0x64), 75 << 40)] * 2,
        contexts.IDS["token pair"]: [reference_mix_hash(add(77, reference_mix_hash(-5, 11 << 40)), 76 << 40)] * 2,
        contexts.IDS["word two back"]: [reference_mix_hash(0x51 + 0x64, 77 << 40)] * 2,
        contexts.IDS["word and runs"]: [reference_mix_hash(add(123456789, (runs << 8) | 0x24), 78 << 40)] * 2,
        contexts.IDS["column and classes"]: [  # the column: 0x18 - 0x13 bytes of the line so far, then none
            reference_mix_hash((5 << 24) | ((classes & 0xFFF) << 8) | 0x64, 79 << 40),
            reference_mix_hash(((classes & 0xFFF) << 8) | 0x64, 79 << 40)],
    }
    assert sorted(expected) == list(range(44, 61))
    for kind, hashes in expected.items():
        out = np.zeros(2, dtype=np.int64)
        _hashes(kind, c4, words, np.zeros(text.TEXT_SIZE, dtype=np.int64), np.zeros(1, dtype=np.int32), hist,
                positions, out)
        assert out.tolist() == hashes, contexts.NAMES[kind]
