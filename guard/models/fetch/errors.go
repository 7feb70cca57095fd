package fetch

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-guard/guard/guard/units"
)

// HTTPError is a status a server answered instead of the file. Hint says
// what to do about it.
type HTTPError struct {
	URL        string
	Status     int
	Hint       string
	RetryAfter time.Duration // from a 429 or 503 Retry-After header
}

func (e *HTTPError) Error() string {
	s := fmt.Sprintf("%s: %d %s", e.URL, e.Status, strings.ToLower(http.StatusText(e.Status)))
	if e.Hint != "" {
		s += ": " + e.Hint
	}
	return s
}

// Temporary reports whether the same URL may answer differently later.
func (e *HTTPError) Temporary() bool {
	return e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// MismatchError says a source serves, or declares before any download,
// something other than what was asked for: a different size or sha256.
// Against the manifest it is a manifest problem; against the source's own
// declaration, the source's. Either way Fetch does not retry it and tries
// the next url.
type MismatchError struct {
	URL  string
	What string // "size" or "sha256"
	Want string // the expected figure
	Got  string // the source's figure
	// Declared names the header (X-Linked-Size, X-Linked-Etag) when Got is
	// what the source declared, so nothing was downloaded.
	Declared string
	// WantFrom is set when Want is not the manifest's but what this url
	// declared (its X-Linked-Etag).
	WantFrom string
	// Named says the url's own address names Want (an OCI blob's,
	// .../blobs/sha256:HEX): what it served is damaged or tampered with,
	// and the pin, if any, is right.
	Named bool
}

// Damaged reports whether the source served other bytes than it names or
// declares itself: the fix is the source's, never the manifest's.
func (e *MismatchError) Damaged() bool {
	return e.What == "sha256" && (e.Named || e.WantFrom != "")
}

func (e *MismatchError) Error() string {
	if e.Named {
		return fmt.Sprintf("%s serves a file whose sha256 is %s, but its address names sha256 %s: the copy it serves is damaged or was tampered with, and nothing of it was kept; repair it at the source (push the model again) or use another url",
			e.URL, e.Got, e.Want)
	}
	if e.WantFrom != "" {
		return fmt.Sprintf("%s serves a file whose %s is %s, but it declared %s (X-Linked-Etag): the file it serves is not the one it names; try again later, or use another url",
			e.URL, e.What, e.Got, e.Want)
	}
	verb, got := "serves", e.Got
	if e.Declared != "" {
		verb, got = "declares", e.Got+" ("+e.Declared+")"
	}
	s := fmt.Sprintf("%s %s a file whose %s is %s, but the manifest says %s: the manifest or the url is wrong", e.URL, verb, e.What, got, e.Want)
	if e.Declared != "" {
		s += ", and a download could never verify, so nothing was downloaded"
	}
	// The file is not kept (a wrong file never stays under the model's
	// name), so `guard manifest pin` alone has nothing to hash: say which
	// line to change first.
	var fix string
	switch _, err := strconv.ParseInt(e.Got, 10, 64); {
	case e.What == "size" && err == nil && e.Declared != "":
		fix = fmt.Sprintf("set size = %s in the manifest, then `guard manifest pin --remote` records its sha256", e.Got)
	case e.What == "size" && err == nil:
		fix = fmt.Sprintf("set size = %s in the manifest, then `guard heal` fetches it and `guard manifest pin` records its sha256", e.Got)
	case e.What == "sha256" && e.Declared != "":
		fix = fmt.Sprintf("set sha256 = %q in the manifest", e.Got)
	case e.What == "sha256":
		fix = fmt.Sprintf("set sha256 = %q in the manifest (or empty it, `guard heal`, then `guard manifest pin`)", e.Got)
	default:
		fix = "correct the manifest, `guard heal`, then `guard manifest pin`"
	}
	return s + "; if that file is the one you want, " + fix
}

// ErrNoSpace is matched (errors.Is) by every out-of-space failure.
var ErrNoSpace = errors.New("no space left on device")

// SpaceError is a download that does not fit on its file system.
type SpaceError struct {
	Dir  string
	Need int64 // bytes still to write; 0 = unknown (no size in the manifest)
	Free int64 // bytes free for this user; -1 = unknown
}

func (e *SpaceError) Error() string {
	s := "no space left on device in " + e.Dir
	if e.Need > 0 {
		s += fmt.Sprintf(": the download needs %d more bytes (%s)", e.Need, units.Bytes(e.Need))
		if e.Free >= 0 {
			s += fmt.Sprintf(" and %d are free", e.Free)
		}
	}
	return s + "; free some space and heal again"
}

// FreeSpace returns the bytes an unprivileged user may still write in dir,
// or -1 when the file system does not say.
func FreeSpace(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// Is makes errors.Is(err, ErrNoSpace) true.
func (e *SpaceError) Is(target error) bool { return target == ErrNoSpace }

// BodyError is a response that is an error page (HTML, JSON, "Entry not
// found", a Git-LFS pointer) or not a GGUF file where one was expected.
type BodyError struct {
	URL string
	Err error
}

func (e *BodyError) Error() string {
	return fmt.Sprintf("%s sent %v", e.URL, e.Err)
}

func (e *BodyError) Unwrap() error { return e.Err }

// StallError is an attempt that got fewer than MinRate bytes a second
// over its last Window (no answer at all counts): treated as a dropped
// connection, retried and resumed.
type StallError struct {
	URL     string
	Got     int64 // bytes in the last Window
	Window  time.Duration
	MinRate int64 // bytes/s
}

func (e *StallError) Error() string {
	return fmt.Sprintf("%s: %d bytes in the last %s, under the minimum of %s; the connection is treated as dropped",
		e.URL, e.Got, e.Window, units.Rate(float64(e.MinRate)))
}

// restartError ends an attempt whose partial file was discarded (a 416, a
// 206 at the wrong offset, a resumed file that hashed wrong): the next
// attempt starts over at once, without a back-off.
type restartError struct{ reason string }

func (e *restartError) Error() string { return e.reason }

// fatalError ends the whole Fetch: trying another URL cannot help (the
// disk, the partial file).
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

// shortError is a body that ended cleanly before the expected size: a
// connection closed by a server or proxy that sent no length.
type shortError struct {
	url       string
	got, want int64
}

func (e *shortError) Error() string {
	return fmt.Sprintf("%s: connection closed after %d of %d bytes", e.url, e.got, e.want)
}

// netError is a failure of the connection itself (refused, reset, a body
// cut short): worth a retry, and a resume.
type netError struct{ err error }

func (e *netError) Error() string { return e.err.Error() }
func (e *netError) Unwrap() error { return e.err }

func isNetError(err error) bool {
	var n *netError
	return errors.As(err, &n)
}

// OfflineError is a url whose host could not be looked up or whose network
// is unreachable: this machine is probably offline. It is tried once, not
// retried: six tries a model would only make a person wait.
type OfflineError struct {
	URL string
	Err error
}

func (e *OfflineError) Error() string { return fmt.Sprintf("%s: %v (offline?)", e.URL, e.Err) }
func (e *OfflineError) Unwrap() error { return e.Err }

// offline reports whether err says the network, not the server, failed: a
// failed DNS lookup, or no route to the network or host.
func offline(err error) bool {
	var dns *net.DNSError
	return errors.As(err, &dns) || errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH)
}
