// Command stream is the floor of guard's one-stream download: one GET of
// URL into FILE with guard's copy loop (four 1 MiB buffers, writes of at
// least 512 KiB at their offset) and, with -sha256, the sha256 on a
// goroutine of its own fed the written buffers, as guard's does. Nothing
// else: no HEAD, no lock, no partial file, no rename. The download table
// times it beside guard and curl to show what guard's work costs apart
// from the hash, and what the hash adds.
package main

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
)

const (
	buffers = 4
	bufSize = 1 << 20
	flushAt = 512 << 10
)

func main() {
	hash := flag.Bool("sha256", false, "hash the bytes as they are written")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: stream [-sha256] URL FILE")
		os.Exit(2)
	}
	if err := fetch(flag.Arg(0), flag.Arg(1), *hash); err != nil {
		fmt.Fprintln(os.Stderr, "stream:", err)
		os.Exit(1)
	}
}

func fetch(url, file string, hash bool) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()

	work, free, done := make(chan []byte, buffers), make(chan []byte, buffers), make(chan []byte)
	for range buffers {
		free <- make([]byte, bufSize)
	}
	go func() {
		h := sha256.New()
		for b := range work {
			if hash {
				h.Write(b)
			}
			free <- b[:cap(b)]
		}
		done <- h.Sum(nil)
	}()
	off, fill, buf := int64(0), 0, <-free
	for {
		n, rerr := resp.Body.Read(buf[fill:])
		fill += n
		if fill >= flushAt || (rerr != nil && fill > 0) {
			if _, err := f.WriteAt(buf[:fill], off); err != nil {
				return err
			}
			off += int64(fill)
			work <- buf[:fill]
			buf, fill = <-free, 0
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	close(work)
	<-done
	return f.Sync()
}
