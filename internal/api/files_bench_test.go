package api_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFileUploadMemory (with PARLEY_BENCH=1; a measurement) uploads five
// files of files.max_bytes (20 MiB) at once, on SQLite and PostgreSQL, and
// measures how much the process's memory grows meanwhile: its peak
// resident size (VmHWM, reset first) over its resident size before, and
// the high-water of the Go heap sampled every few milliseconds. The client
// is in the same process; it generates its bodies as it sends them, so
// what grows is the server's. It logs the throughput (MB/s of file bytes
// stored) and fails if the peak grows by 64 MiB or more.
func TestFileUploadMemory(t *testing.T) {
	if os.Getenv("PARLEY_BENCH") == "" {
		t.Skip("a measurement: set PARLEY_BENCH=1 to run it")
	}
	const (
		uploads = 5
		size    = 20 << 20
		limit   = 64 << 20
	)
	onBothStores(t, func(t *testing.T, backend string) {
		s := newOn(t, backend)
		tok := s.token("alice")
		upload := func(seed uint64) error {
			body, ct := generatedForm(seed, size)
			req, err := http.NewRequest("POST", s.url+"/api/v1/files", body)
			if err != nil {
				return err
			}
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", ct)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != http.StatusCreated {
				return fmt.Errorf("status %d: %s", res.StatusCode, b)
			}
			return nil
		}
		if err := upload(1); err != nil { // warm up: pools, prepared statements
			t.Fatal(err)
		}

		runtime.GC()
		debug.FreeOSMemory()
		rssBefore := procStatus(t, "VmRSS")
		resetPeakRSS(t)
		heap := sampleHeap()
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, uploads)
		for i := range uploads {
			wg.Go(func() { errs <- upload(uint64(100 + i)) })
		}
		wg.Wait()
		elapsed := time.Since(start)
		heapPeak, heapBefore := heap()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		peak := procStatus(t, "VmHWM")
		growth := peak - rssBefore
		mb := float64(uploads*size) / 1e6
		t.Logf("%s: %d uploads of %d MiB at once in %v: %.1f MB/s; peak RSS %d MiB over %d MiB before (+%d MiB); Go heap high-water +%d MiB",
			backend, uploads, size>>20, elapsed.Round(time.Millisecond), mb/elapsed.Seconds(),
			peak>>20, rssBefore>>20, growth>>20, (heapPeak-heapBefore)>>20)
		if growth >= limit {
			t.Errorf("the peak resident size grew by %d MiB, want less than %d MiB", growth>>20, limit>>20)
		}
	})
}

// generatedForm returns a multipart/form-data body holding a PNG of size
// bytes, made as it is read (a PNG signature, then bytes of a generator
// seeded with seed), and its Content-Type.
func generatedForm(seed uint64, size int64) (io.Reader, string) {
	const boundary = "parleybenchboundary"
	head := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"bench.png\"\r\n" +
		"Content-Type: image/png\r\n\r\n"
	tail := "\r\n--" + boundary + "--\r\n"
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	content := io.MultiReader(bytes.NewReader(png), io.LimitReader(&randReader{r: rand.New(rand.NewPCG(seed, seed))}, size-int64(len(png))))
	return io.MultiReader(strings.NewReader(head), content, strings.NewReader(tail)), "multipart/form-data; boundary=" + boundary
}

// randReader reads pseudo-random bytes.
type randReader struct{ r *rand.Rand }

func (g *randReader) Read(p []byte) (int, error) {
	for i := 0; i+8 <= len(p); i += 8 {
		v := g.r.Uint64()
		for j := range 8 {
			p[i+j] = byte(v >> (8 * j))
		}
	}
	return len(p) &^ 7, nil
}

// procStatus reads a size field of /proc/self/status, in bytes.
func procStatus(t *testing.T, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// resetPeakRSS sets the process's VmHWM back to its resident size now.
func resetPeakRSS(t *testing.T) {
	t.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak resident size: %v", err)
	}
}

// sampleHeap samples the bytes of live heap objects every 2 ms until the
// returned function is called, which returns the highest sample and the
// first.
func sampleHeap() func() (peak, first int64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 { metrics.Read(sample); return int64(sample[0].Value.Uint64()) }
	first := read()
	stop, done := make(chan struct{}), make(chan int64)
	go func() {
		peak := first
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				done <- max(peak, read())
				return
			case <-tick.C:
				peak = max(peak, read())
			}
		}
	}()
	return func() (int64, int64) {
		close(stop)
		return <-done, first
	}
}
