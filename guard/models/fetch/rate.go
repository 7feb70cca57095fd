package fetch

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// samples is how many times a window the rate watch looks at the count:
// a stall is found within a window and a quarter of it starting.
const samples = 4

// rateWatch calls stalled once when fewer than min*window bytes went
// through its reader in the last window. Bytes are counted as they arrive;
// the count is sampled samples times a window, so the check slides with
// time and costs nothing per read beyond an atomic add.
type rateWatch struct {
	n      atomic.Int64
	got    atomic.Int64 // bytes in the last window at the last check
	done   chan struct{}
	once   sync.Once
	ticker *time.Ticker
	min    int64 // bytes/s
	window time.Duration
}

func watchRate(min int64, window time.Duration, stalled func()) *rateWatch {
	w := &rateWatch{done: make(chan struct{}), ticker: time.NewTicker(window / samples), min: min, window: window}
	need := int64(float64(min) * window.Seconds())
	go func() {
		ring := make([]int64, samples+1) // the count at the last samples+1 ticks
		for tick := 0; ; tick++ {
			select {
			case <-w.done:
				return
			case <-w.ticker.C:
			}
			now := w.n.Load()
			ring[tick%len(ring)] = now
			if tick+1 < samples {
				continue // less than a window since the request
			}
			then := int64(0)
			if tick >= samples {
				then = ring[(tick-samples)%len(ring)]
			}
			w.got.Store(now - then)
			if now-then < need {
				stalled()
				return
			}
		}
	}()
	return w
}

// reader counts what r delivers.
func (w *rateWatch) reader(r io.Reader) io.Reader { return &countingReader{r: r, n: &w.n} }

// last is the byte count of the last window checked.
func (w *rateWatch) last() int64 { return w.got.Load() }

func (w *rateWatch) stop() {
	w.once.Do(func() {
		w.ticker.Stop()
		close(w.done)
	})
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}
