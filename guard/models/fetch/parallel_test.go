package fetch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/models/fetch"
	"github.com/sandbox-guard/guard/guard/models/fetch/ranged"
)

// Downloads in parts against misbehaving servers. The files are small and
// the parts smaller (PartSize), so each test runs many parts.

const testPart = 64 << 10

// partRequest is a Fetch of data in parts of testPart over conns
// connections, in parts however fast the first one is (FastConn).
func partRequest(t *testing.T, url string, data []byte, conns int) fetch.Request {
	r := request(t, url)
	r.Size, r.SHA256 = int64(len(data)), guardtest.Sum(data)
	r.Connections, r.PartSize, r.FastConn = conns, testPart, -1
	return r
}

// rangeOf reads a request's "bytes=A-B" (B = -1 when open).
func rangeOf(r *http.Request) (start, end int64, ok bool) {
	v, found := strings.CutPrefix(r.Header.Get("Range"), "bytes=")
	if !found {
		return 0, 0, false
	}
	a, b, _ := strings.Cut(v, "-")
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	end = -1
	if b != "" {
		if end, err = strconv.ParseInt(b, 10, 64); err != nil {
			return 0, 0, false
		}
	}
	return start, end, true
}

// log keeps the ranges a server was asked for.
type rangeLog struct {
	mu     sync.Mutex
	ranges [][2]int64
}

func (l *rangeLog) add(r *http.Request) {
	if s, e, ok := rangeOf(r); ok {
		l.mu.Lock()
		l.ranges = append(l.ranges, [2]int64{s, e})
		l.mu.Unlock()
	}
}

func (l *rangeLog) all() [][2]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][2]int64(nil), l.ranges...)
}

func TestPartsInParallel(t *testing.T) {
	data := guardtest.GGUF(1<<20 + 777)
	var inflight, most atomic.Int64
	// Each part's answer after the first (which says whether the server
	// serves ranges) waits until another part is being asked for too: one
	// connection at a time never gets past the second part (it stalls and
	// the test fails), so passing proves the parts overlap.
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	var log rangeLog
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		log.add(r)
		k := inflight.Add(1)
		defer inflight.Add(-1)
		mu.Lock()
		if k > most.Load() {
			most.Store(k)
		}
		cond.Broadcast()
		for n > 1 && most.Load() < 2 && r.Context().Err() == nil {
			cond.Wait()
		}
		mu.Unlock()
		content(w, r, data)
	})
	r := partRequest(t, srv.URL, data, 4)
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	mustNotExist(t, r.Dest+".partial", r.Dest+".partial.parts")
	if res.Connections != 4 || res.SHA256 != guardtest.Sum(data) || res.Bytes != int64(len(data)) {
		t.Fatalf("result %+v, want 4 connections, the sum and every byte", res)
	}
	want := (len(data) + testPart - 1) / testPart
	got := log.all()
	if len(got) != want {
		t.Fatalf("server saw %d ranges, want one a part (%d): %v", len(got), want, got)
	}
	for _, g := range got {
		if g[1] < 0 || g[1]-g[0]+1 > testPart {
			t.Fatalf("range %v is not one part", g)
		}
	}
	if most.Load() < 2 {
		t.Fatalf("at most %d requests at once", most.Load())
	}
}

// A server that answers the first part's range with the whole file (200)
// is read in one stream on that very answer.
func TestPartsServerIgnoresRange(t *testing.T) {
	data := guardtest.GGUF(500_000)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data)
	})
	r := partRequest(t, srv.URL, data, 8)
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if res.Connections != 1 || srv.requests.Load() != 1 || srv.sent.Load() != int64(len(data)) {
		t.Fatalf("connections %d, requests %d, sent %d; want one stream of one request", res.Connections, srv.requests.Load(), srv.sent.Load())
	}
}

// A first answer that is a 206 but not for the range asked (a wrong
// Content-Range, a Content-Length that disagrees) makes guard fetch the
// file in one stream.
func TestPartsWrongFirstRangeFallsBackToOneStream(t *testing.T) {
	data := guardtest.GGUF(400_000)
	for name, lie := range map[string]func(w http.ResponseWriter, s, e int64){
		"content-range": func(w http.ResponseWriter, s, e int64) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", s+1, e, len(data)))
			w.Header().Set("Content-Length", strconv.FormatInt(e-s, 10))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[s+1 : e+1])
		},
		"no total": func(w http.ResponseWriter, s, e int64) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/*", s, e))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[s : e+1])
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
				if s, e, ok := rangeOf(r); ok && e >= 0 {
					lie(w, s, e)
					return
				}
				content(w, r, data)
			})
			r := partRequest(t, srv.URL, data, 8)
			res, err := fetch.Fetch(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			mustFile(t, r.Dest, data)
			if res.Connections != 1 || srv.requests.Load() != 2 {
				t.Fatalf("connections %d after %d requests, want one stream after the one wrong answer", res.Connections, srv.requests.Load())
			}
		})
	}
}

// A server whose Content-Range names another total size serves another
// file: refused without a download, nothing left.
func TestPartsServerLiesAboutTheSize(t *testing.T) {
	data := guardtest.GGUF(400_000)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		s, e, _ := rangeOf(r)
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", s, e, len(data)+1))
		w.WriteHeader(http.StatusPartialContent)
		w.Write(data[s : e+1])
	})
	r := partRequest(t, srv.URL, data, 8)
	_, err := fetch.Fetch(context.Background(), r)
	var mm *fetch.MismatchError
	if !errors.As(err, &mm) || mm.What != "size" {
		t.Fatalf("err %v, want a size mismatch", err)
	}
	mustNotExist(t, r.Dest, r.Dest+".partial", r.Dest+".partial.parts")
}

// A body shorter than its Content-Length, on every part's first answer:
// each part continues from where its body stopped.
func TestPartsConnectionClosedMidPart(t *testing.T) {
	data := guardtest.GGUF(600_000)
	var log rangeLog
	var once sync.Map
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		log.add(r)
		s, e, ok := rangeOf(r)
		if _, again := once.LoadOrStore(s, true); ok && e >= 0 && !again && e-s > 1000 {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", s, e, len(data)))
			w.Header().Set("Content-Length", strconv.FormatInt(e-s+1, 10))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[s : s+(e-s)/2])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		content(w, r, data)
	})
	r := partRequest(t, srv.URL, data, 4)
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if res.Connections != 4 {
		t.Fatalf("%d connections", res.Connections)
	}
	// Every retry continues its part: no range starts at a part's start
	// twice.
	starts := map[int64]int{}
	for _, g := range log.all() {
		starts[g[0]]++
	}
	for s, k := range starts {
		if k > 1 {
			t.Errorf("range from byte %d asked %d times: a cut part started over", s, k)
		}
	}
}

// The file changes on the server in the middle (a new ETag): a part's
// If-Range gets the whole new file (200), every part starts over, and the
// file is the new one whole, never a mix.
func TestPartsFileChangesMidDownload(t *testing.T) {
	oldData := guardtest.GGUF(600_000)
	newData := append([]byte(nil), oldData...)
	for i := 100; i < len(newData); i += 1000 {
		newData[i] ^= 0xff
	}
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if n <= 3 {
			content(w, r, oldData)
			return
		}
		content(w, r, newData)
	})
	r := partRequest(t, srv.URL, newData, 2)
	if _, err := fetch.Fetch(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, newData)
	mustNotExist(t, r.Dest+".partial", r.Dest+".partial.parts")
}

// A server that validates by Last-Modified alone and changes it.
func TestPartsLastModifiedChanges(t *testing.T) {
	oldData := guardtest.GGUF(300_000)
	newData := append([]byte(nil), oldData...)
	newData[200_000] ^= 1
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		d, at := oldData, t0
		if n > 2 {
			d, at = newData, t0.Add(time.Hour)
		}
		// No If-Range support: only the header tells.
		r.Header.Del("If-Range")
		w.Header().Set("Last-Modified", at.Format(http.TimeFormat))
		http.ServeContent(w, r, "", time.Time{}, strings.NewReader(string(d)))
	})
	r := partRequest(t, srv.URL, newData, 2)
	if _, err := fetch.Fetch(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, newData)
}

// A 416 to a part in the middle: the file shrank or changed; start over.
func TestParts416StartsOver(t *testing.T) {
	data := guardtest.GGUF(400_000)
	var refused atomic.Bool
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if s, _, _ := rangeOf(r); s > 0 && refused.CompareAndSwap(false, true) {
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		content(w, r, data)
	})
	r := partRequest(t, srv.URL, data, 3)
	if _, err := fetch.Fetch(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
}

// Bytes that do not match the sha256: refused, and no file is left under
// the model's name or beside it.
func TestPartsWrongBytesRefused(t *testing.T) {
	data := guardtest.GGUF(500_000)
	bad := append([]byte(nil), data...)
	bad[300_000] ^= 0x55
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, bad) })
	r := partRequest(t, srv.URL, data, 4)
	_, err := fetch.Fetch(context.Background(), r)
	var mm *fetch.MismatchError
	if !errors.As(err, &mm) || mm.What != "sha256" {
		t.Fatalf("err %v, want a sha256 mismatch", err)
	}
	mustNotExist(t, r.Dest, r.Dest+".partial", r.Dest+".partial.parts")
}

// A slow first byte on every answer changes nothing but the time.
func TestPartsSlowFirstByte(t *testing.T) {
	data := guardtest.GGUF(300_000)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		time.Sleep(50 * time.Millisecond)
		content(w, r, data)
	})
	r := partRequest(t, srv.URL, data, 8)
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if res.Connections != 5 { // 300 000 bytes are 5 parts
		t.Fatalf("%d connections, want one a part", res.Connections)
	}
}

// A part that stalls (headers, some bytes, then nothing) is dropped by the
// rate watch and continued; the other parts are not disturbed.
func TestPartsStalledPartContinues(t *testing.T) {
	data := guardtest.GGUF(400_000)
	var stalled atomic.Bool
	var log rangeLog
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		log.add(r)
		s, e, _ := rangeOf(r)
		if s == 2*testPart && stalled.CompareAndSwap(false, true) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", s, e, len(data)))
			w.Header().Set("Content-Length", strconv.FormatInt(e-s+1, 10))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[s : s+1000])
			w.(http.Flusher).Flush()
			<-r.Context().Done() // until guard gives up on it
			return
		}
		content(w, r, data)
	})
	r := partRequest(t, srv.URL, data, 3)
	r.RateWindow = 400 * time.Millisecond
	r.MinRate = 10_000
	if _, err := fetch.Fetch(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	resumed := false
	for _, g := range log.all() {
		if g[0] == 2*testPart+1000 {
			resumed = true
		}
	}
	if !resumed {
		t.Fatalf("the stalled part was not continued from byte %d: %v", 2*testPart+1000, log.all())
	}
}

// A Hub url redirects to a signed CDN url; the signature expires during the
// download (403). The parts ask the Hub again for a fresh one, keeping
// what they wrote, and the first redirect served every part until then.
func TestPartsExpiredSignatureResolvedAgain(t *testing.T) {
	data := guardtest.GGUF(700_000)
	var sig, hub, cdn, refused atomic.Int64
	sig.Store(1)
	var srvURL string
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if r.URL.Path == "/hub/m.gguf" {
			hub.Add(1)
			http.Redirect(w, r, fmt.Sprintf("%s/cdn/m.gguf?sig=%d", srvURL, sig.Load()), http.StatusFound)
			return
		}
		if r.URL.Query().Get("sig") != strconv.FormatInt(sig.Load(), 10) {
			refused.Add(1)
			w.WriteHeader(http.StatusForbidden)
			return
		}
		if cdn.Add(1) == 4 {
			sig.Add(1) // expires after this answer
		}
		content(w, r, data)
	})
	srvURL = srv.URL
	r := partRequest(t, srv.URL+"/hub/m.gguf", data, 3)
	if _, err := fetch.Fetch(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	parts := int64((len(data) + testPart - 1) / testPart)
	// However many requests were refused (each of the 3 workers may have
	// two out: its part's and the next one's, asked ahead), one asks the
	// Hub again and the others wait for where it leads.
	if h, f := hub.Load(), refused.Load(); h != 2 || f < 1 {
		t.Fatalf("the hub was asked %d times, %d requests refused: want once, then once again after the first refusal", h, f)
	}
	if got := cdn.Load(); got != parts {
		t.Fatalf("the cdn served %d parts, want each of the %d once", got, parts)
	}
}

// A resumed download in parts has no first request to resolve its url:
// one part's request asks the Hub, and the other connections wait for
// where it leads instead of each asking it.
func TestPartsResumedAskTheHubOnce(t *testing.T) {
	data := guardtest.GGUF(700_000)
	var hub atomic.Int64
	var srvURL string
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if r.URL.Path == "/hub/m.gguf" {
			hub.Add(1)
			http.Redirect(w, r, srvURL+"/cdn/m.gguf?sig=1", http.StatusFound)
			return
		}
		content(w, r, data)
	})
	srvURL = srv.URL
	r := partRequest(t, srv.URL+"/hub/m.gguf", data, 4)
	partialInParts(t, r.Dest, data, testPart) // part 0 on disk and in its record
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if !res.Resumed || res.Connections != 4 {
		t.Errorf("resumed %v over %d connections, want a resume over 4", res.Resumed, res.Connections)
	}
	if h := hub.Load(); h != 1 {
		t.Errorf("the hub was asked %d times, want once for the 4 connections", h)
	}
}

// A resumed download in parts continues from its record without asking
// again for what the record counts.
func TestPartsResumeFromRecord(t *testing.T) {
	data := guardtest.GGUF(640_000)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if s, _, _ := rangeOf(r); s >= 5*testPart {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		content(w, r, data)
	})
	r := partRequest(t, srv.URL, data, 2)
	r.Retries = -1
	if _, err := fetch.Fetch(context.Background(), r); err == nil {
		t.Fatal("the first run finished")
	}
	mustNotExist(t, r.Dest)
	resumeChecked(t, r, data)
}

// resumeChecked checks the partial file left by an interrupted Fetch of
// r against its record (the record never counts a byte the file does not
// hold), then resumes it and checks that no range the record counts is
// asked for again.
func resumeChecked(t *testing.T, r fetch.Request, data []byte) {
	t.Helper()
	rec, err := ranged.Load(r.Dest + ".partial.parts")
	if err != nil {
		t.Fatalf("no record kept: %v", err)
	}
	if err := rec.Valid(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if got := fetch.PartialBytes(r.Dest); got != rec.Bytes() {
		t.Errorf("PartialBytes = %d, want the %d bytes the record counts", got, rec.Bytes())
	}
	disk, err := os.ReadFile(r.Dest + ".partial")
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range rec.Done {
		s := int64(i) * rec.Part
		if !bytes.Equal(disk[s:s+d], data[s:s+d]) {
			t.Fatalf("the record counts %d bytes of part %d that the file does not hold", d, i)
		}
	}
	var log rangeLog
	srv := serve(t, func(w http.ResponseWriter, req *http.Request, n int64, c *counter) {
		log.add(req)
		content(w, req, data)
	})
	r.URLs = []string{srv.URL}
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	mustNotExist(t, r.Dest+".partial", r.Dest+".partial.parts")
	if rec.Bytes() > 0 && !res.Resumed {
		t.Error("not reported as resumed")
	}
	if want := int64(len(data)) - rec.Bytes(); res.Bytes != want {
		t.Errorf("the resume fetched %d bytes, want the %d the record lacks", res.Bytes, want)
	}
	for _, g := range log.all() {
		i := g[0] / rec.Part
		if g[0] < i*rec.Part+rec.Done[i] {
			t.Errorf("the resume asked again for bytes %v; the record had part %d up to byte %d", g, i, i*rec.Part+rec.Done[i])
		}
	}
}

// The child half of TestPartsResumeAfterSIGKILL: a Fetch the parent kills.
func TestPartsKilledChild(t *testing.T) {
	url := os.Getenv("GUARD_TEST_FETCH_URL")
	if url == "" {
		t.Skip("run by TestPartsResumeAfterSIGKILL")
	}
	size, _ := strconv.Atoi(os.Getenv("GUARD_TEST_FETCH_SIZE"))
	r := fetch.Request{URLs: []string{url}, Dest: os.Getenv("GUARD_TEST_FETCH_DEST"), Size: int64(size),
		SHA256: os.Getenv("GUARD_TEST_FETCH_SHA"), Connections: 4, PartSize: testPart, FastConn: -1, Backoff: time.Millisecond}
	_, err := fetch.Fetch(context.Background(), r)
	t.Fatalf("the parent did not kill this Fetch (err %v)", err)
}

// SIGKILL of a download in parts at several points, then a resume: the
// record never counts bytes the file lacks, the resume never asks again
// for what it counts, and the file is right.
func TestPartsResumeAfterSIGKILL(t *testing.T) {
	data := guardtest.GGUF(2 << 20)
	for _, frac := range []float64{0.1, 0.45, 0.8} {
		t.Run(fmt.Sprint(frac), func(t *testing.T) {
			killAt := int64(frac * float64(len(data)))
			var (
				mu    sync.Mutex
				child *os.Process
				done  bool
			)
			kill := func() {
				mu.Lock()
				defer mu.Unlock()
				if !done && child != nil {
					done = true
					_ = child.Signal(syscall.SIGKILL)
				}
			}
			srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
				content(&killingWriter{ResponseWriter: w, c: c, at: killAt, kill: kill}, r, data)
			})
			r := partRequest(t, srv.URL, data, 4)
			cmd := exec.Command(os.Args[0], "-test.run=^TestPartsKilledChild$")
			cmd.Env = append(os.Environ(), "GUARD_TEST_FETCH_URL="+srv.URL, "GUARD_TEST_FETCH_DEST="+r.Dest,
				"GUARD_TEST_FETCH_SIZE="+strconv.Itoa(len(data)), "GUARD_TEST_FETCH_SHA="+r.SHA256)
			mu.Lock()
			if err := cmd.Start(); err != nil {
				mu.Unlock()
				t.Fatal(err)
			}
			child = cmd.Process
			mu.Unlock()
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child ended with %v, want killed", err)
			}
			mustNotExist(t, r.Dest)
			resumeChecked(t, r, data)
		})
	}
}

// killingWriter kills the child once the server has sent at bytes.
type killingWriter struct {
	http.ResponseWriter
	c    *counter
	at   int64
	kill func()
}

func (w *killingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	if w.c.sent.Load() >= w.at {
		w.kill()
	}
	return n, err
}

// lineWatch is a progress writer that closes seen once a line holds want.
type lineWatch struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	seen chan struct{}
	once sync.Once
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// One progress line for the whole model says how many connections fetch
// it, and the last line sums them up. A line may come before the parts
// start (a tick while the first part is asked for): the parts after the
// first wait for the line that names the connections.
func TestPartsProgressNamesTheConnections(t *testing.T) {
	data := guardtest.GGUF(700_000)
	w := &lineWatch{want: ": 4 connections\n", seen: make(chan struct{})}
	srv := serve(t, func(rw http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if n > 1 { // the parts after the first wait for a progress line
			select {
			case <-w.seen:
			case <-r.Context().Done():
				return
			}
		}
		content(rw, r, data)
	})
	r := partRequest(t, srv.URL, data, 4)
	r.Progress, r.Pace.Every = w, 5*time.Millisecond
	if _, err := fetch.Fetch(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	out := w.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	named := slices.IndexFunc(lines, func(l string) bool { return strings.HasSuffix(l, ": 4 connections") })
	if named < 0 || named == len(lines)-1 || !strings.Contains(lines[named], "guard: downloading m.gguf") || !strings.Contains(lines[named], "%") {
		t.Errorf("progress lines %q, want one with the model's percent and its 4 connections before the last", lines)
	}
	if last := lines[len(lines)-1]; last != "guard: downloaded m.gguf (683.6 KiB over 4 connections)" {
		t.Errorf("last line %q", last)
	}
}

// A first part that comes at least FastConn bytes a second shows nothing
// caps one connection: the rest of the file comes in one stream, from the
// byte the first part ended at, guarded by If-Range with its ETag.
func TestFirstPartFastFinishesInOneStream(t *testing.T) {
	data := guardtest.GGUF(5*testPart + 999)
	var log rangeLog
	var ifRange []string
	var mu sync.Mutex
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		log.add(r)
		mu.Lock()
		ifRange = append(ifRange, r.Header.Get("If-Range"))
		mu.Unlock()
		content(w, r, data)
	})
	r := partRequest(t, srv.URL, data, 4)
	r.FastConn = 1 // a byte a second: any first part is fast
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	mustNotExist(t, r.Dest+".partial", r.Dest+".partial.meta", r.Dest+".partial.parts")
	if res.Connections != 1 || res.Resumed || res.SHA256 != guardtest.Sum(data) || res.Bytes != int64(len(data)) {
		t.Fatalf("result %+v, want one connection, not resumed, the sum and every byte", res)
	}
	got := log.all()
	want := [][2]int64{{0, testPart - 1}, {testPart, -1}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("ranges asked %v, want %v", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if etag := `"` + guardtest.Sum(data)[:16] + `"`; ifRange[1] != etag {
		t.Errorf("the rest was asked with If-Range %q, want the first answer's ETag %s", ifRange[1], etag)
	}
}

// A first part that is slow (a cap on each connection) brings in the other
// connections, and its own connection goes on with the first part from
// the byte it reached: no byte of it is asked for twice. The server sends
// the first part's first 16 KiB, then a byte every few milliseconds until
// another part is asked for: guard passes only by growing.
func TestFirstPartSlowBringsInTheOthers(t *testing.T) {
	data := guardtest.GGUF(8*testPart + 999)
	var log rangeLog
	others := make(chan struct{})
	var once sync.Once
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		log.add(r)
		if n > 1 {
			once.Do(func() { close(others) })
			content(w, r, data)
			return
		}
		w.Header().Set("ETag", `"`+guardtest.Sum(data)[:16]+`"`)
		w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-%d/%d", testPart-1, len(data)))
		w.Header().Set("Content-Length", strconv.Itoa(testPart))
		w.WriteHeader(http.StatusPartialContent)
		at := 16 << 10
		w.Write(data[:at])
		w.(http.Flusher).Flush()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for at < testPart {
			select {
			case <-others:
				w.Write(data[at:testPart])
				return
			case <-r.Context().Done():
				return
			case <-tick.C:
				w.Write(data[at : at+1])
				w.(http.Flusher).Flush()
				at++
			}
		}
	})
	r := partRequest(t, srv.URL, data, 4)
	r.FastConn = 0 // the default
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	mustNotExist(t, r.Dest+".partial", r.Dest+".partial.meta", r.Dest+".partial.parts")
	if res.Connections != 4 || res.Bytes != int64(len(data)) {
		t.Fatalf("result %+v, want 4 connections and every byte once", res)
	}
	for _, g := range log.all()[1:] {
		if g[0] < testPart {
			t.Errorf("asked again for %v, within the first part its own answer went on with", g)
		}
	}
}

// The rest of a file whose first part came fast is asked of the
// manifest's url again, which redirects to a fresh signature: a signed url
// that expired after the first part (403) costs nothing, and no retry.
func TestFirstPartFastRestSignedAfresh(t *testing.T) {
	data := guardtest.GGUF(5*testPart + 999)
	var sig, hub atomic.Int64
	sig.Store(1)
	var srvURL string
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if r.URL.Path == "/hub/m.gguf" {
			hub.Add(1)
			http.Redirect(w, r, fmt.Sprintf("%s/cdn/m.gguf?sig=%d", srvURL, sig.Load()), http.StatusFound)
			return
		}
		if r.URL.Query().Get("sig") != strconv.FormatInt(sig.Load(), 10) {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		sig.Add(1) // each signature serves one answer
		content(w, r, data)
	})
	srvURL = srv.URL
	r := partRequest(t, srv.URL+"/hub/m.gguf", data, 4)
	r.FastConn, r.Retries = 1, -1
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if res.Connections != 1 || hub.Load() != 2 || srv.requests.Load() != 4 {
		t.Fatalf("connections %d, hub asked %d times, %d requests; want one stream: the first part and the rest, each by a redirect", res.Connections, hub.Load(), srv.requests.Load())
	}
}

// A planted record of 64-byte parts (valid by ranged.Record.Valid) is not
// resumed as it is, one request per 64 bytes: its parts are not what guard
// makes, so the download starts its parts afresh, a few requests in all
// (issue 36).
func TestPlantedTinyPartsAreDropped(t *testing.T) {
	data := guardtest.GGUF(9 << 20)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if n > 64 { // far more than the parts of the real rule: refuse, so a crawl fails fast
			w.WriteHeader(http.StatusNotFound)
			return
		}
		content(w, r, data)
	})
	r := request(t, srv.URL)
	r.Size, r.SHA256, r.Connections, r.FastConn = int64(len(data)), guardtest.Sum(data), 4, -1
	partialInParts(t, r.Dest, data, 64)
	var said bytes.Buffer
	r.Progress = &said
	if _, err := fetch.Fetch(context.Background(), r); err != nil {
		t.Fatalf("%v after %d requests", err, srv.requests.Load())
	}
	mustFile(t, r.Dest, data)
	if n := srv.requests.Load(); n > 8 {
		t.Errorf("%d requests for 9 MiB: the planted record's parts were used", n)
	}
	if !strings.Contains(said.String(), "its record has parts of 64 B, and guard makes parts of 4.0 MiB to 64.0 MiB; starting the download over") {
		t.Errorf("said %q", said.String())
	}
}

// A record another user owns is not resumed, whatever its parts (root
// only: it takes a chown).
func TestAnotherUsersRecordIsDropped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving the record to another user needs root")
	}
	data := guardtest.GGUF(9 << 20)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
	r := request(t, srv.URL)
	r.Size, r.SHA256, r.Connections, r.FastConn = int64(len(data)), guardtest.Sum(data), 4, -1
	partialInParts(t, r.Dest, data, 4<<20)
	if err := os.Chown(r.Dest+".partial.parts", 65534, 65534); err != nil {
		t.Fatal(err)
	}
	var said bytes.Buffer
	r.Progress = &said
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if res.Resumed || !strings.Contains(said.String(), "its record is another user's file; starting the download over") {
		t.Errorf("resumed %v; said %q", res.Resumed, said.String())
	}
}

// A source that freezes during a download in parts (every connection
// gets nothing more) is not asked again: the Fetch ends at the stall with
// each part asked once, not each part retried (issue 36).
func TestPartsFrozenSourceIsNotAskedAgain(t *testing.T) {
	data := guardtest.GGUF(640_000)
	var frozen atomic.Bool
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if frozen.Load() {
			<-r.Context().Done()
			return
		}
		if s, _, _ := rangeOf(r); s >= 3*testPart {
			frozen.Store(true) // from here on, nothing
			<-r.Context().Done()
			return
		}
		content(w, r, data)
	})
	r := partRequest(t, srv.URL, data, 2)
	r.RateWindow = 300 * time.Millisecond
	done := make(chan error, 1)
	go func() { _, err := fetch.Fetch(context.Background(), r); done <- err }()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute): // a hang guard, not a verdict on speed
		t.Fatal("the Fetch of a frozen source did not end")
	}
	var all *fetch.SourcesError
	if !errors.As(err, &all) || !all.Stalled() {
		t.Fatalf("err %v, want every source stalled", err)
	}
	if n := srv.requests.Load(); n > 5 { // parts 0-2, then one request per connection
		t.Errorf("%d requests: the frozen source was asked again", n)
	}
}
