package files

import "unicode/utf8"

// textCheck watches every byte of a file go by and remembers whether they
// were all text: UTF-8, without a binary data byte (a C0 control other
// than tab, line feed, form feed, carriage return and escape: what the
// sniffer calls binary in a file's first bytes). A file that begins as
// text is stored as text only if it stays text to its end, so a ZIP or an
// executable behind a page of text is refused, not served back as
// text/plain.
type textCheck struct {
	carry  []byte // the start of a rune that the next write completes
	binary bool   // a byte that is not text was seen
}

func (c *textCheck) Write(p []byte) (int, error) {
	n := len(p)
	if c.binary {
		return n, nil
	}
	for _, b := range p {
		if binaryByte(b) {
			c.binary = true
			return n, nil
		}
	}
	if len(c.carry) > 0 {
		joined := append(c.carry, p[:min(utf8.UTFMax, len(p))]...)
		if !utf8.FullRune(joined) {
			c.carry = joined
			return n, nil
		}
		r, size := utf8.DecodeRune(joined)
		if r == utf8.RuneError && size <= 1 {
			c.binary = true
			return n, nil
		}
		p, c.carry = p[size-len(c.carry):], nil
	}
	// Keep an incomplete last rune for the next write.
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				c.carry, p = append([]byte(nil), p[i:]...), p[:i]
			}
			break
		}
	}
	if !utf8.Valid(p) {
		c.binary = true
	}
	return n, nil
}

// text reports whether everything written was text, ending with a whole
// rune.
func (c *textCheck) text() bool { return !c.binary && len(c.carry) == 0 }

// binaryByte is a byte that never occurs in text: a C0 control other than
// tab, line feed, form feed, carriage return and escape.
func binaryByte(b byte) bool {
	return b <= 0x08 || b == 0x0B || (b >= 0x0E && b <= 0x1A) || (b >= 0x1C && b <= 0x1F)
}

// isText reports whether the media type is one of the text types.
func isText(mediaType string) bool {
	switch mediaType {
	case Text, Markdown, JSON, CSV:
		return true
	}
	return false
}
