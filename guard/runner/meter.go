package runner

import "bytes"

// outputMeter decides whether output really advances, for the stall
// watchdog. Tools that hang often keep drawing: npm redraws a spinner every
// 80 ms, progress bars repaint the same line. Counting every byte as progress
// would never let such a tool stall, so the meter models a cursor instead and
// counts only output that moves past anything drawn before: a new line, or
// printable text past the furthest column reached on the furthest line.
// Carriage returns, backspaces, cursor movement and escape sequences (CSI,
// OSC, the rest) only move the cursor or repaint.
//
// The zero value is ready to use. State survives across calls, so an escape
// sequence split between two writes is still recognised.
type outputMeter struct {
	row, col       int // cursor, rows relative to the first line seen
	maxRow, maxCol int // furthest line reached and the furthest column on it
	esc            escState
	param          int  // first numeric CSI parameter so far
	hasParam       bool // a digit of param has been seen
	paramDone      bool // a ';' ended the first parameter
}

type escState uint8

const (
	escNone   escState = iota
	escStart           // after ESC
	escCSI             // inside ESC [ ... final
	escOSC             // inside ESC ] ... BEL or ESC \
	escOSCEsc          // ESC seen inside an OSC
	escOther           // ESC ( ESC ) and similar: one more byte
)

// feed consumes p and reports whether any of it was progress.
//
// Most output is plain lines: no escape sequence, the cursor on the
// furthest line. For such a chunk the newlines alone decide (counted with
// the vectorised bytes.Count), and only the unfinished line after the last
// one is stepped through byte by byte.
func (m *outputMeter) feed(p []byte) bool {
	if m.esc == escNone && m.row == m.maxRow && bytes.IndexByte(p, 0x1b) < 0 {
		if nl := bytes.Count(p, newline); nl > 0 {
			// Each newline opens a new furthest line at column 0: carriage
			// returns, backspaces and text before the last one no longer
			// matter.
			m.row += nl
			m.maxRow, m.col, m.maxCol = m.row, 0, 0
			m.stepAll(p[bytes.LastIndexByte(p, '\n')+1:])
			return true
		}
	}
	return m.stepAll(p)
}

var newline = []byte{'\n'}

// stepAll steps through p. Text and the control bytes that draw nothing
// are handled here, without a call a byte; the rest goes to step.
func (m *outputMeter) stepAll(p []byte) bool {
	progressed := false
	for _, b := range p {
		if m.esc == escNone {
			switch byteClasses[b] {
			case textByte:
				if m.text() {
					progressed = true
				}
				continue
			case inertByte:
				continue
			}
		}
		if m.step(b) {
			progressed = true
		}
	}
	return progressed
}

// byteClass sorts bytes outside escape sequences by what they do to the
// cursor.
type byteClass uint8

const (
	specialByte byteClass = iota // newline, carriage return, backspace, tab, ESC: step decides
	textByte                     // takes a column: printable ASCII, a UTF-8 lead byte
	inertByte                    // draws nothing: other control bytes, UTF-8 continuation bytes
)

var byteClasses = func() (c [256]byteClass) {
	for b := range c {
		switch {
		case b == '\n', b == '\r', b == '\b', b == '\t', b == 0x1b:
			c[b] = specialByte
		case b < 0x20, b == 0x7f, b >= 0x80 && b < 0xc0:
			c[b] = inertByte
		default:
			c[b] = textByte
		}
	}
	return c
}()

func (m *outputMeter) step(b byte) bool {
	switch m.esc {
	case escStart:
		return m.afterEsc(b)
	case escCSI:
		m.inCSI(b)
		return false
	case escOSC:
		switch b {
		case 0x07:
			m.esc = escNone
		case 0x1b:
			m.esc = escOSCEsc
		}
		return false
	case escOSCEsc:
		// ESC \ ends the string; anything else is a broken sequence that
		// we still treat as ended rather than swallow the rest of the output.
		m.esc = escNone
		return false
	case escOther:
		m.esc = escNone
		return false
	}
	switch {
	case b == 0x1b:
		m.esc = escStart
		return false
	case b == '\n':
		return m.down(1, true)
	case b == '\r':
		m.col = 0
	case b == '\b':
		if m.col > 0 {
			m.col--
		}
	case b == '\t':
		m.col = (m.col/8 + 1) * 8
	case b < 0x20 || b == 0x7f:
		// other control characters draw nothing
	case b >= 0x80 && b < 0xc0:
		// UTF-8 continuation byte: the lead byte already took the column
	default:
		return m.text()
	}
	return false
}

// text takes one column for a character drawn at the cursor: progress when
// it goes past the furthest column on the furthest line.
func (m *outputMeter) text() bool {
	m.col++
	if m.row == m.maxRow && m.col > m.maxCol {
		m.maxCol = m.col
		return true
	}
	return false
}

func (m *outputMeter) afterEsc(b byte) bool {
	switch b {
	case '[':
		m.esc = escCSI
		m.param, m.hasParam, m.paramDone = 0, false, false
	case ']':
		m.esc = escOSC
	case '(', ')', '*', '+', '#', '%':
		m.esc = escOther
	case 'E': // next line
		m.esc = escNone
		return m.down(1, true)
	case 'M': // reverse index: up one line
		m.esc = escNone
		m.row--
	default: // ESC 7, ESC 8, ESC = and the like move nothing we track
		m.esc = escNone
	}
	return false
}

func (m *outputMeter) inCSI(b byte) {
	switch {
	case b >= '0' && b <= '9':
		if !m.paramDone && m.param < 1<<16 {
			m.param = m.param*10 + int(b-'0')
			m.hasParam = true
		}
		return
	case b == ';':
		m.paramDone = true
		return
	case b < 0x40 || b > 0x7e:
		return // private markers and intermediates
	}
	m.esc = escNone
	n := m.param
	if !m.hasParam || n == 0 {
		n = 1
	}
	switch b {
	case 'A': // up
		m.row -= n
	case 'B': // down, without scrolling anything new into view
		m.down(n, false)
	case 'C': // forward
		m.col += n
	case 'D': // back
		m.col = max(0, m.col-n)
	case 'E': // next line, column 0
		m.down(n, false)
	case 'F': // previous line, column 0
		m.row -= n
		m.col = 0
	case 'G': // column n
		m.col = n - 1
	case 'H', 'f': // absolute position: a full-screen repaint, not new output
		m.row = min(m.row, m.maxRow)
		m.col = 0
	}
}

// down moves the cursor n lines down to column 0. A newline written on the
// furthest line opens a new one, which is progress; moving down over lines
// already drawn is not.
func (m *outputMeter) down(n int, newline bool) bool {
	m.row += n
	m.col = 0
	if m.row > m.maxRow {
		if !newline {
			m.row = min(m.row, m.maxRow)
			return false
		}
		m.maxRow = m.row
		m.maxCol = 0
		return true
	}
	return false
}
