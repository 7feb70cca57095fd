package fetch

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"sync"
)

// pipe hashes chunks on a goroutine of its own, so that sha256 overlaps the
// network and the disk instead of adding to them. Its buffers are
// allocated once per download and passed around: no per-chunk allocation.
type pipe struct {
	h       hash.Hash
	work    chan []byte
	free    chan []byte
	pending sync.WaitGroup
}

func newPipe(buffers, size int) *pipe {
	p := &pipe{h: sha256.New(), work: make(chan []byte, buffers), free: make(chan []byte, buffers)}
	for range buffers {
		p.free <- make([]byte, size)
	}
	go p.loop()
	return p
}

func (p *pipe) loop() {
	for b := range p.work {
		p.h.Write(b)
		p.free <- b[:cap(b)]
		p.pending.Done()
	}
}

// buffer returns a free buffer, waiting for the hasher if all are busy.
func (p *pipe) buffer() []byte { return <-p.free }

// hash queues b, which the pipe now owns.
func (p *pipe) hash(b []byte) {
	p.pending.Add(1)
	p.work <- b
}

// giveBack returns a buffer that holds nothing to hash.
func (p *pipe) giveBack(b []byte) { p.free <- b[:cap(b)] }

func (p *pipe) reset() {
	p.pending.Wait()
	p.h.Reset()
}

func (p *pipe) sum() string {
	p.pending.Wait()
	return hex.EncodeToString(p.h.Sum(nil))
}

func (p *pipe) close() {
	p.pending.Wait()
	close(p.work)
}
