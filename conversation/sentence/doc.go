// Package sentence cuts a streamed LLM reply into pieces to show and to
// speak: sentences, or sooner for the first piece of a reply so that speech
// starts early.
//
// The pieces cover the stream exactly: their Display texts, concatenated,
// give back every byte that was pushed, whatever the deltas looked like.
// Without CutAtDeltaEnd the pieces do not depend on where the deltas were
// cut, and whitespace after a sentence end stays with that sentence (the
// OLV chat bubble joins pieces as sent).
//
// Each rune is looked at once, when it arrives, and the speech text is built
// during the same pass: a delta costs time in proportion to its length,
// however long the unfinished piece has grown. A piece costs one allocation
// (two with emotions). A cut for MaxPieceRunes after the piece's last
// whitespace scans the piece again up to it and the rest again as the next
// piece's; each rune is looked at three times at most, so the cost stays
// linear.
//
// # Where a piece ends
//
//   - After . ! ? (and runs like ?! or ...) followed by whitespace. Closing
//     quotes, brackets, emphasis marks and emoji right after the mark stay
//     with the sentence: `He said "Stop." ` and `Done!🎉 `.
//   - After 。！？… without waiting for a space, once the next rune shows it is
//     not a closer (「はい。」 stays whole). An ASCII ! or ? directly followed
//     by Chinese, Japanese or Korean text ends the sentence too (すごい!次).
//   - At a newline, if the piece has something to say (list items and
//     headings have no periods).
//   - All whitespace (and, after a mark, emoji) that follows the end belongs
//     to the piece, so a piece is handed out when the first rune of the next
//     one arrives, or at Flush.
//   - A piece with nothing speakable is not cut at a mark or newline: it
//     joins the next one instead of becoming a silent piece of its own.
//   - Not after abbreviations (Mr. Mrs. Ms. Dr. Prof. Sr. Jr. St. vs. etc.,
//     letters joined by periods such as e.g. i.e. a.m. U.S.), single capital
//     initials other than "I" (J. K. Rowling), list markers (1. at the start
//     of a line or piece), or "No." before a number (No. 5). Decimals,
//     versions, URLs and e-mail addresses have no space after their dots.
//   - The first spoken piece of a reply may end earlier: at , ; followed by
//     whitespace or at ，、； (FasterFirstResponse), or at the first word
//     boundary after FirstPieceMaxWords words (for Chinese and Japanese, two
//     characters count as a word and any two characters have a boundary).
//   - <think>…</think> (tags in any case, split across deltas or not) comes
//     out as Think pieces, cut like text, with the tags in their Display.
//   - A ``` fence at a line start opens a code block, silent up to and
//     including its closing ``` line; a long block is cut at newlines every
//     fenceCutBytes or so.
//   - With MaxPieceRunes set (koe sets it from conversation.max_piece_chars),
//     a piece that would grow past that many runes without any of the cuts
//     above is cut after its last whitespace, or, if it has none (Chinese or
//     Japanese text, one endless word), right at the limit, between two
//     runes. A model that streams on and on without ending a sentence then
//     still gets spoken piece by piece, and the splitter holds at most one
//     piece. Speech is cleaned as for any cut: an aside or emphasis open at
//     the cut stays open in the next piece. A think tag is never split, so
//     a piece holds at most max(MaxPieceRunes, 8) runes.
//
// # Cutting at a delta's end
//
// Most ends are only known for sure once the next rune is seen: "3." may be
// "3.5", and the whitespace after "Hello." belongs to its piece. With
// CutAtDeltaEnd, a piece whose end is not in doubt is handed out at the end
// of the delta that completes it, one token sooner (33 ms at 30 tokens/s,
// 100 ms at 10), and the whitespace after it opens the next piece instead.
// The end is not in doubt after:
//
//   - whitespace following an end, and a newline;
//   - 。！？… and the first piece's ，、；;
//   - . ! or ? right after a word of letters that is not an abbreviation,
//     an initial (other than "I") or "www", and ... (three dots or more);
//   - the first piece's , or ; right after a word of letters.
//
// Anything else waits for the next delta as before: a number ("3." "1,"),
// a mark inside a URL, closers after the mark (`"Fine."라고` goes on), a
// '*' or '<' whose meaning the next rune decides, think blocks and code.
// The same words are spoken either way, and a cut the whole stream would
// not get can only fall at a delta's end (FuzzSplitter checks both). On
// replies in English, Chinese, Japanese and Korean, cut into tokens as an
// LLM streams them, it adds no wrong cut and hands out 49 of 55 pieces with
// their last token instead of 2 (TestCorpusCuts).
//
// # What is spoken
//
// Speech is the Display text without: [...] (an emotion keyword inside is
// reported in Emotions), (...) and （...）, which nest and carry over to the
// next pieces until closed; *...* (roleplay actions; as in OLV, "**bold**"
// keeps its words, "*italic*" loses them) and <tag ...>, which end at a
// newline at the latest so a stray "*" or "<" cannot silence the rest of a
// reply; emoji; markdown marks (#, > and -, +, * bullets at line starts,
// backticks, _, ~, |); URLs starting with http://, https:// or www.; faces
// such as :( and :-), whose parenthesis opens no aside. Runs of whitespace
// become one space, and punctuation left at the start goes. Speech is "" when
// no letter or digit is left.
package sentence
