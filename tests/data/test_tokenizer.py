"""The fast tokenizer equals the reference algorithm (plain-Python oracle) on edge cases and the demo corpus."""
import pytest

from conftest import DEMO
from mlperf_bert.errors import UserError
from mlperf_bert.data.tokenizer import (SlowTokenizer, Tokenizer, apply_final_sigma, decode_text, load_vocab, read_text,
                                   split_lines)

EDGE = [
  "", "   ", "Hello, World!", "naïve café ÅNGSTRÖM Zürich",  # accents (NFD, Mn dropped)
  "e\u0301te\u0301 \u0301alone",  # combining marks, one at a word start
  "a\x01b\x7fc\x1fd", "x\u200by\ufeffz\u00adw\u2060v", "nul\x00here bad\ufffdchar",  # Cc / Cf / NUL / U+FFFD dropped
  "tab\there\nnew\rcr", "nbsp\u00a0x\u3000ideo\u2002en\u202fnarrow\u1680ogham",  # whitespace incl. Zs
  "line\u2028sep\u2029para", "\x0bvt\x0cff\x85nel",  # Zl/Zp split; VT/FF/NEL are Cc: dropped, not spaces
  "^caret$dollar`tick~tilde|bar", "¿Qué? «hola» — “quote” ‘single’ …, 【x】",  # ASCII and Unicode punctuation
  "\u1fefgreek varia", "a\u037eb\u0387c",  # NFD produces ASCII punctuation
  "日本語テキスト", "漢字abc한국어", "\U0002B820x\U0002B91Fy\U0002B920z\U0002B740", "\uf900\U0002F800",  # CJK blocks
  "ΟΔΥΣΣΕΥΣ ΣΑΣ. Σ aΣb ΑΣ\u0301 Α\u00adΣ Α\x01Σ ΑΣ'Α Σ Σ1 ΑΣ1 ΑΣ\u0301Α",  # Greek final sigma contexts
  "İstanbul ΣΊΣΥΦΟΣ", "ǅungla ﬁne ß ẞ",
  "a" * 200, "a" * 201, "é" * 150, "x" * 150 + "\u0301" * 100,  # the 200-character word limit (after NFD/Mn)
  "unaffable 12,345.67 e-mail@example.com http://x.org/a?b=c", "[CLS] [MASK] [unused0]",
  "\U0001F600 emoji \u2603 snow \U000E0041 tag \U000F0000 private",
]


@pytest.fixture(scope="module")
def vocab():
  return load_vocab(DEMO / "vocab.txt")


@pytest.fixture(scope="module")
def toks(vocab):
  return Tokenizer(vocab), SlowTokenizer(vocab)


@pytest.mark.parametrize("text", EDGE)
def test_edge_strings_match_reference(toks, text):
  fast, slow = toks
  assert fast.encode(text) == slow.encode(text)
  assert fast.tokenize(text) == slow.tokenize(text)


def test_known_reference_behaviour(toks):
  fast, _ = toks
  assert fast.tokenize("Hello, WORLD!") == ["hello", ",", "world", "!"]
  assert fast.tokenize("Café naïve") == ["cafe", "naive"]
  assert fast.tokenize("a" * 201) == ["[UNK]"]
  assert fast.tokenize("^$`") == ["^", "$", "`"]
  assert fast.tokenize("a\x00b\u200bc") == fast.tokenize("abc")
  assert fast.tokenize("x\u00a0y") == ["x", "y"]
  assert fast.tokenize("\U0002B820\U0002B821") == ["[UNK]", "[UNK]"]  # each CJK char is its own word
  # str.lower(): word-final capital sigma -> final sigma; the demo vocab has both letters
  assert fast.tokenize("ΣΑΣ")[-1] == "##ς" and fast.tokenize("ΣΑΣΑ")[0] == "σ"
  assert apply_final_sigma("ΑΣ ΑΣΑ Σ") == "Ας ΑΣΑ Σ"


def test_tiny_vocab_wordpiece(tmp_path):
  v = tmp_path / "vocab.txt"
  v.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nun\n##aff\n##able\naff\nun\n  ##x  \n")
  vocab = load_vocab(v)
  assert vocab["un"] == 5 and vocab["##x"] == 9  # stripped lines, a repeat keeps its first id, ids stay dense
  fast, slow = Tokenizer(vocab), SlowTokenizer(vocab)
  for text in ["unaffable", "unaffablex", "Unaffable aff", "zzz"]:
    assert fast.tokenize(text) == slow.tokenize(text)
  assert fast.tokenize("unaffable") == ["un", "##aff", "##able"]
  assert fast.tokenize("unaffablez aff") == ["[UNK]", "aff"]


def test_vocab_without_special_tokens_is_refused(tmp_path):
  v = tmp_path / "myvocab.txt"
  v.write_text("[PAD]\n[UNK]\n[CLS]\nhello\n")
  with pytest.raises(UserError, match=r"myvocab\.txt.*\[SEP\], \[MASK\]"):
    load_vocab(v)
  with pytest.raises(UserError, match="nothere.txt"):
    load_vocab(tmp_path / "nothere.txt")


def test_invalid_utf8_is_dropped_and_counted(tmp_path, toks):
  data = "ok é\n".encode() + b"\xff\xfe bad \xe2\x82 cut\n" + b"\xed\xa0\x80surrogate\n"
  text, dropped = decode_text(data)
  assert dropped == 2 + 2 + 3 and text == "ok é\n bad  cut\nsurrogate\n"
  f = tmp_path / "t.txt"
  f.write_bytes(data)
  assert read_text(f) == (text, dropped)
  assert split_lines("a\nb\r\n\nc") == ["a", "b\r", "", "c"] and split_lines("a\n") == ["a"]


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_whole_demo_corpus_matches_reference(toks, demo_text):
  fast, slow = toks
  for path in sorted(demo_text.iterdir()):
    text, dropped = read_text(path)
    assert dropped == 0
    lines = [l.strip() for l in split_lines(text)]
    got = fast.encode_lines(lines)
    for line, ids in zip(lines, got):
      assert ids == slow.encode(line), (path.name, line[:80])


def test_batched_encoding_matches_reference(toks):
  """encode_lines takes a shortcut for printable-ASCII lines; both paths must equal the reference."""
  import random
  fast, slow = toks
  rng = random.Random(5)
  alphabet = [chr(c) for c in range(32, 127)] + ["\t", "\x01", "\x7f", "é", "Σ"]
  lines = list(EDGE) + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
  assert fast.encode_lines(lines) == [slow.encode(l) for l in lines]
