package lua

import (
	"fmt"
	"strings"

	glua "github.com/yuin/gopher-lua"
)

// The string library's pattern functions (string.find, match, gmatch and
// gsub) are replaced by this bounded matcher: gopher-lua's own runs in Go
// without ever looking at the state's context, and backtracks without
// bound, so one call such as
//
//	string.find(string.rep("a", 40), string.rep("a*", 30) .. "b")
//
// could run for years; a time limit answered the call but could not stop
// the goroutine, which went on burning a core. This matcher is a port of
// Lua 5.1's (lstrlib.c), with three bounds:
//
//   - it checks the running call's context every pollSteps steps, so a time
//     limit (or a cancel) stops it for real, like any other Lua code;
//   - one match attempt (the pattern tried at one position of the subject)
//     may take Source.matchSteps steps (defaultMatchSteps) plus
//     stepsPerByte for each byte of the subject: a pattern whose work is
//     linear in its subject always fits, while exponential backtracking
//     fails at once with "pattern too complex", whatever the call's time
//     limit, and the state is kept (nothing was left half-done);
//   - its recursion is at most maxMatchDepth deep, as in Lua 5.2 and later.
//
// A step is one pattern item tried at one position of the subject, or one
// byte of a set ([...]) or of a back-reference compared. string.gsub also
// refuses to build a result over maxRepBytes, like string.rep.

const (
	// defaultMatchSteps and stepsPerByte bound the work of one match
	// attempt: about a tenth of a second, plus a little per byte.
	defaultMatchSteps = 10_000_000
	stepsPerByte      = 16
	// maxMatchDepth bounds the matcher's recursion: one level per
	// repetition or capture the pattern has open at once.
	maxMatchDepth = 200
	// pollSteps is how often the matcher checks the call's context.
	pollSteps     = 1 << 12
	maxCaptures   = 32 // LUA_MAXCAPTURES
	capUnfinished = -1
	capPosition   = -2
	// specials are the characters that make string.find match a pattern
	// rather than search for plain text.
	specials = "^$*+?.([%-"
)

type capture struct{ init, len int }

// matcher is the state of one match: Lua 5.1's MatchState, with the step
// budget. Positions are byte offsets; -1 means no match.
type matcher struct {
	L     *glua.LState
	fn    string // the Lua function, for errors: "string.find"
	src   string
	pat   string
	level int // captures open or closed so far
	caps  [maxCaptures]capture
	depth int

	budget int // steps an attempt may take
	used   int // steps of this attempt, up to the last check
	credit int // steps left until the next check
	done   <-chan struct{}
}

func (r *runner) newMatcher(L *glua.LState, fn, src, pat string) *matcher {
	m := &matcher{fn: fn, src: src, pat: pat, budget: r.src.matchSteps + stepsPerByte*len(src), credit: pollSteps}
	m.on(L)
	return m
}

// on makes L, a coroutine of the running call, the matcher's state.
func (m *matcher) on(L *glua.LState) {
	m.L, m.done = L, nil
	if ctx := L.Context(); ctx != nil {
		m.done = ctx.Done()
	}
}

// attempt is the match of the pattern at src[s:], with a fresh budget.
func (m *matcher) attempt(s int) int {
	m.level, m.used, m.depth = 0, 0, 0
	return m.match(s, 0)
}

// step spends n steps; every pollSteps steps, check checks the budget and
// whether the call has been stopped.
func (m *matcher) step(n int) {
	if m.credit -= n; m.credit < 0 {
		m.check()
	}
}

func (m *matcher) check() {
	m.used += pollSteps - m.credit
	m.credit = pollSteps
	if m.used > m.budget {
		m.L.RaiseError("%s: pattern too complex: it backtracks too much on this subject", m.fn)
	}
	select {
	case <-m.done:
		m.L.RaiseError("%s: stopped: %v", m.fn, m.L.Context().Err())
	default:
	}
}

func (m *matcher) errorf(format string, args ...any) {
	m.L.RaiseError("%s", fmt.Sprintf(format, args...))
}

// match is Lua 5.1's match: the end of the match of pat[p:] at src[s:],
// or -1.
func (m *matcher) match(s, p int) int {
	if m.depth++; m.depth > maxMatchDepth {
		m.tooDeep()
	}
	e := m.doMatch(s, p)
	m.depth--
	return e
}

func (m *matcher) tooDeep() {
	m.L.RaiseError("%s: pattern too complex (more than %d nested repetitions or captures)", m.fn, maxMatchDepth)
}

func (m *matcher) doMatch(s, p int) int {
	pat, src := m.pat, m.src
	for {
		m.step(1)
		if p == len(pat) {
			return s
		}
		switch pat[p] {
		case '(':
			if p+1 < len(pat) && pat[p+1] == ')' {
				return m.startCapture(s, p+2, capPosition)
			}
			return m.startCapture(s, p+1, capUnfinished)
		case ')':
			return m.endCapture(s, p+1)
		case '$':
			if p+1 == len(pat) {
				if s == len(src) {
					return s
				}
				return -1
			}
		case '%':
			if p+1 == len(pat) {
				break // classEnd reports the malformed pattern
			}
			switch c := pat[p+1]; {
			case c == 'b':
				if s = m.matchBalance(s, p+2); s == -1 {
					return -1
				}
				p += 4
				continue
			case c == 'f':
				p += 2
				if p == len(pat) || pat[p] != '[' {
					m.errorf("missing '[' after '%%f' in pattern")
				}
				ep := m.classEnd(p)
				var prev, cur byte
				if s > 0 {
					prev = src[s-1]
				}
				if s < len(src) {
					cur = src[s]
				}
				m.step(ep - p)
				if matchBracketClass(prev, pat, p, ep-1) || !matchBracketClass(cur, pat, p, ep-1) {
					return -1
				}
				p = ep
				continue
			case isDigit(c):
				if s = m.matchCapture(s, c); s == -1 {
					return -1
				}
				p += 2
				continue
			}
		}
		// A single-character class, perhaps repeated.
		ep := m.classEnd(p)
		ok := s < len(src) && m.single(src[s], p, ep)
		if ep < len(pat) {
			switch pat[ep] {
			case '?':
				if ok {
					if e := m.match(s+1, ep+1); e != -1 {
						return e
					}
				}
				p = ep + 1
				continue
			case '*':
				return m.maxExpand(s, p, ep)
			case '+':
				if !ok {
					return -1
				}
				return m.maxExpand(s+1, p, ep)
			case '-':
				return m.minExpand(s, p, ep)
			}
		}
		if !ok {
			return -1
		}
		s, p = s+1, ep
	}
}

// single reports whether c matches the class at pat[p:ep], spending a step
// per byte of the class.
func (m *matcher) single(c byte, p, ep int) bool {
	m.step(ep - p)
	switch m.pat[p] {
	case '.':
		return true
	case '%':
		return matchClass(c, m.pat[p+1])
	case '[':
		return matchBracketClass(c, m.pat, p, ep-1)
	default:
		return m.pat[p] == c
	}
}

func (m *matcher) maxExpand(s, p, ep int) int {
	i := 0
	for s+i < len(m.src) && m.single(m.src[s+i], p, ep) {
		i++
	}
	for ; i >= 0; i-- {
		if e := m.match(s+i, ep+1); e != -1 {
			return e
		}
	}
	return -1
}

func (m *matcher) minExpand(s, p, ep int) int {
	for {
		if e := m.match(s, ep+1); e != -1 {
			return e
		}
		if s < len(m.src) && m.single(m.src[s], p, ep) {
			s++
		} else {
			return -1
		}
	}
}

func (m *matcher) startCapture(s, p, what int) int {
	if m.level >= maxCaptures {
		m.errorf("too many captures")
	}
	m.caps[m.level] = capture{init: s, len: what}
	m.level++
	e := m.match(s, p)
	if e == -1 {
		m.level--
	}
	return e
}

func (m *matcher) endCapture(s, p int) int {
	l := -1
	for i := m.level - 1; i >= 0; i-- {
		if m.caps[i].len == capUnfinished {
			l = i
			break
		}
	}
	if l < 0 {
		m.errorf("invalid pattern capture")
	}
	m.caps[l].len = s - m.caps[l].init
	e := m.match(s, p)
	if e == -1 {
		m.caps[l].len = capUnfinished
	}
	return e
}

func (m *matcher) matchBalance(s, p int) int {
	if p+1 >= len(m.pat) {
		m.errorf("unbalanced pattern")
	}
	if s >= len(m.src) || m.src[s] != m.pat[p] {
		return -1
	}
	b, e := m.pat[p], m.pat[p+1]
	for depth := 1; s+1 < len(m.src); {
		s++
		m.step(1)
		switch m.src[s] {
		case e:
			if depth--; depth == 0 {
				return s + 1
			}
		case b:
			depth++
		}
	}
	return -1
}

func (m *matcher) matchCapture(s int, c byte) int {
	l := int(c) - '1'
	if l < 0 || l >= m.level || m.caps[l].len == capUnfinished {
		m.errorf("invalid capture index")
	}
	c0 := m.caps[l]
	if c0.len < 0 { // a position capture matches no text
		return -1
	}
	m.step(c0.len)
	if len(m.src)-s >= c0.len && m.src[s:s+c0.len] == m.src[c0.init:c0.init+c0.len] {
		return s + c0.len
	}
	return -1
}

// classEnd is the end of the single-character class at pat[p].
func (m *matcher) classEnd(p int) int {
	pat := m.pat
	c := pat[p]
	p++
	switch c {
	case '%':
		if p == len(pat) {
			m.errorf("malformed pattern (ends with '%%')")
		}
		return p + 1
	case '[':
		if p < len(pat) && pat[p] == '^' {
			p++
		}
		for { // the first character is never the closing ']'
			if p >= len(pat) {
				m.errorf("malformed pattern (missing ']')")
			}
			c := pat[p]
			p++
			if c == '%' && p < len(pat) {
				p++
			}
			if p < len(pat) && pat[p] == ']' {
				return p + 1
			}
		}
	}
	return p
}

// matchBracketClass reports whether c is in the set pat[p:ec+1], where
// pat[p] is '[' and pat[ec] its ']'.
func matchBracketClass(c byte, pat string, p, ec int) bool {
	sig := true
	if pat[p+1] == '^' {
		sig = false
		p++
	}
	for p++; p < ec; p++ {
		switch {
		case pat[p] == '%':
			p++
			if matchClass(c, pat[p]) {
				return sig
			}
		case pat[p+1] == '-' && p+2 < ec:
			p += 2
			if pat[p-2] <= c && c <= pat[p] {
				return sig
			}
		case pat[p] == c:
			return sig
		}
	}
	return !sig
}

// matchClass reports whether c is in the class %cl (C locale).
func matchClass(c, cl byte) bool {
	var res bool
	switch cl | 0x20 {
	case 'a':
		res = isAlpha(c)
	case 'c':
		res = c < 0x20 || c == 0x7f
	case 'd':
		res = isDigit(c)
	case 'l':
		res = 'a' <= c && c <= 'z'
	case 'p':
		res = 0x21 <= c && c <= 0x7e && !isAlpha(c) && !isDigit(c)
	case 's':
		res = c == ' ' || '\t' <= c && c <= '\r'
	case 'u':
		res = 'A' <= c && c <= 'Z'
	case 'w':
		res = isAlpha(c) || isDigit(c)
	case 'x':
		res = isDigit(c) || 'a' <= c|0x20 && c|0x20 <= 'f'
	case 'z':
		res = c == 0
	default:
		return cl == c
	}
	if 'a' <= cl && cl <= 'z' {
		return res
	}
	return !res
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isAlpha(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// captureValue is capture i of the match src[s:e]: the whole match when
// the pattern has no captures and i is 0.
func (m *matcher) captureValue(i, s, e int) glua.LValue {
	if i >= m.level {
		if i != 0 {
			m.errorf("invalid capture index")
		}
		return glua.LString(m.src[s:e])
	}
	c := m.caps[i]
	switch c.len {
	case capUnfinished:
		m.errorf("unfinished capture")
	case capPosition:
		return glua.LNumber(c.init + 1)
	}
	return glua.LString(m.src[c.init : c.init+c.len])
}

// pushCaptures pushes the captures of the match src[s:e], or the whole
// match if the pattern has none and whole is set; it returns how many.
func (m *matcher) pushCaptures(s, e int, whole bool) int {
	n := m.level
	if n == 0 && whole {
		n = 1
	}
	for i := range n {
		m.L.Push(m.captureValue(i, s, e))
	}
	return n
}

// posrelat turns a Lua string position (negative counts from the end) into
// a 1-based one, at least 0.
func posrelat(pos, n int) int {
	if pos < 0 {
		pos += n + 1
	}
	return max(pos, 0)
}

// openPatterns replaces the pattern functions of the string library t.
func (r *runner) openPatterns(L *glua.LState, t *glua.LTable) {
	t.RawSetString("find", L.NewFunction(func(L *glua.LState) int { return r.strFind(L, true) }))
	t.RawSetString("match", L.NewFunction(func(L *glua.LState) int { return r.strFind(L, false) }))
	gmatch := L.NewFunction(r.strGmatch)
	t.RawSetString("gmatch", gmatch)
	t.RawSetString("gfind", gmatch)
	t.RawSetString("gsub", L.NewFunction(r.strGsub))
}

// strFind is string.find (find set) and string.match.
func (r *runner) strFind(L *glua.LState, find bool) int {
	s, p := L.CheckString(1), L.CheckString(2)
	init := posrelat(L.OptInt(3, 1), len(s)) - 1
	init = min(max(init, 0), len(s))
	if find && (glua.LVAsBool(L.Get(4)) || !strings.ContainsAny(p, specials)) {
		if i := strings.Index(s[init:], p); i >= 0 {
			L.Push(glua.LNumber(init + i + 1))
			L.Push(glua.LNumber(init + i + len(p)))
			return 2
		}
		L.Push(glua.LNil)
		return 1
	}
	name := "string.match"
	if find {
		name = "string.find"
	}
	anchor := strings.HasPrefix(p, "^")
	if anchor {
		p = p[1:]
	}
	m := r.newMatcher(L, name, s, p)
	for s1 := init; ; s1++ {
		if e := m.attempt(s1); e != -1 {
			if find {
				L.Push(glua.LNumber(s1 + 1))
				L.Push(glua.LNumber(e))
				return m.pushCaptures(-1, -1, false) + 2
			}
			return m.pushCaptures(s1, e, true)
		}
		if anchor || s1 >= len(s) {
			break
		}
	}
	L.Push(glua.LNil)
	return 1
}

// strGmatch is string.gmatch: an iterator that finds the next match each
// time it is called, each call with its own step budget.
func (r *runner) strGmatch(L *glua.LState) int {
	s, p := L.CheckString(1), L.CheckString(2)
	m := r.newMatcher(L, "string.gmatch", s, p)
	pos := 0
	L.Push(L.NewFunction(func(L *glua.LState) int {
		m.on(L)
		for ; pos <= len(s); pos++ {
			if e := m.attempt(pos); e != -1 {
				start := pos
				pos = e
				if e == start { // an empty match: go on at the next position
					pos++
				}
				return m.pushCaptures(start, e, true)
			}
		}
		return 0
	}))
	return 1
}

// strGsub is string.gsub, whose result may be at most maxRepBytes.
func (r *runner) strGsub(L *glua.LState) int {
	src, p := L.CheckString(1), L.CheckString(2)
	repl := L.Get(3)
	switch repl.Type() {
	case glua.LTNumber, glua.LTString, glua.LTFunction, glua.LTTable:
	default:
		L.ArgError(3, "string/function/table expected")
	}
	maxN := L.OptInt(4, len(src)+1)
	anchor := strings.HasPrefix(p, "^")
	if anchor {
		p = p[1:]
	}
	m := r.newMatcher(L, "string.gsub", src, p)
	var b strings.Builder
	// src[kept:s] is text before s that stays as it is, not yet copied.
	n, s, kept := 0, 0, 0
	for n < maxN {
		e := m.attempt(s)
		if e != -1 {
			if n++; n == 1 {
				b.Grow(len(src))
			}
			b.WriteString(src[kept:s])
			m.addValue(&b, s, e, repl)
			kept = e
			if b.Len() > maxRepBytes {
				L.RaiseError("string.gsub: the result would be larger than %d bytes", maxRepBytes)
			}
		}
		switch {
		case e > s:
			s = e
		case s < len(src):
			s++
		default:
			anchor = true // the end of the subject
		}
		if anchor {
			break
		}
	}
	if n == 0 {
		L.Push(glua.LString(src))
	} else {
		if b.Len()+len(src)-kept > maxRepBytes {
			L.RaiseError("string.gsub: the result would be larger than %d bytes", maxRepBytes)
		}
		b.WriteString(src[kept:])
		L.Push(glua.LString(b.String()))
	}
	L.Push(glua.LNumber(n))
	return 2
}

// addValue appends the replacement of the match src[s:e] (Lua 5.1's
// add_value): false or nil from a function or table keeps the match.
func (m *matcher) addValue(b *strings.Builder, s, e int, repl glua.LValue) {
	L := m.L
	var v glua.LValue
	switch repl := repl.(type) {
	case *glua.LFunction:
		L.Push(repl)
		L.Call(m.pushCaptures(s, e, true), 1)
		v = L.Get(-1)
		L.Pop(1)
	case *glua.LTable:
		v = L.GetTable(repl, m.captureValue(0, s, e))
	default:
		m.addString(b, s, e, glua.LVAsString(repl))
		return
	}
	switch v := v.(type) {
	case glua.LString, glua.LNumber:
		b.WriteString(glua.LVAsString(v))
	default:
		if glua.LVAsBool(v) {
			m.errorf("invalid replacement value (a %s)", v.Type())
		}
		b.WriteString(m.src[s:e])
	}
}

// addString appends a replacement string: %0 is the match, %1 to %9 its
// captures, % and any other character that character. A % that ends the
// replacement stays a % (Lua 5.1 would add a NUL byte).
func (m *matcher) addString(b *strings.Builder, s, e int, repl string) {
	for {
		i := strings.IndexByte(repl, '%')
		if i < 0 || i+1 == len(repl) {
			b.WriteString(repl)
			return
		}
		b.WriteString(repl[:i])
		switch c := repl[i+1]; {
		case c == '0':
			b.WriteString(m.src[s:e])
		case isDigit(c):
			b.WriteString(glua.LVAsString(m.captureValue(int(c-'1'), s, e)))
		default:
			b.WriteByte(c)
		}
		if b.Len() > maxRepBytes {
			m.L.RaiseError("string.gsub: the result would be larger than %d bytes", maxRepBytes)
		}
		repl = repl[i+2:]
	}
}
