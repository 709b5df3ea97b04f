// loadgen: the HTTP load generator of bench/loadgen.py (standard library only).
//
// hey and oha send one URL and one body; SUP's benchmarks need requests that differ: filters for
// different users, PATCHes that really change something, POSTs of new users. This sends `-c` workers'
// requests for `-z`, cycling through the URLs of `-urls` (one a line) and the bodies of `-bodies`
// (one a line, `{n}` replaced by the request's number), at most `-q` requests/s in total (0: as fast as
// the server answers; paced requests are taken by whichever worker is free, so a slow server lowers the
// rate rather than queueing). Prints one CSV line per answered request: latency (s), status, start (s
// after the first); on stderr, `transport-errors N` for requests that got no answer.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type headerList []string

func (h *headerList) String() string     { return strings.Join(*h, ", ") }
func (h *headerList) Set(v string) error { *h = append(*h, v); return nil }

func lines(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var kept []string
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" {
			kept = append(kept, line)
		}
	}
	return kept
}

func main() {
	duration := flag.Duration("z", 10*time.Second, "how long to send")
	workers := flag.Int("c", 16, "concurrent workers (connections)")
	rate := flag.Float64("q", 0, "total requests/s (0: as fast as answered)")
	method := flag.String("m", "GET", "HTTP method")
	urlsFile := flag.String("urls", "", "file with one URL a line, cycled")
	bodiesFile := flag.String("bodies", "", "file with one body a line, cycled; {n} is the request number")
	var headers headerList
	flag.Var(&headers, "H", "a header, 'Name: value' (repeatable)")
	flag.Parse()
	urls := lines(*urlsFile)
	var bodies []string
	if *bodiesFile != "" {
		bodies = lines(*bodiesFile)
	}
	transport := &http.Transport{MaxIdleConnsPerHost: *workers, MaxConnsPerHost: *workers, DisableCompression: true}
	client := &http.Client{Transport: transport, Timeout: 60 * time.Second}
	var ticks <-chan time.Time
	if *rate > 0 {
		ticker := time.NewTicker(time.Duration(float64(time.Second) / *rate))
		defer ticker.Stop()
		ticks = ticker.C
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	var counter, failures int64 = -1, 0
	start := time.Now()
	deadline := start.Add(*duration)
	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if ticks != nil {
					<-ticks
				}
				if time.Now().After(deadline) {
					return
				}
				n := atomic.AddInt64(&counter, 1)
				var body io.Reader
				if bodies != nil {
					text := strings.ReplaceAll(bodies[n%int64(len(bodies))], "{n}", strconv.FormatInt(n, 10))
					body = strings.NewReader(text)
				}
				request, err := http.NewRequest(*method, urls[n%int64(len(urls))], body)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				for _, header := range headers {
					name, value, _ := strings.Cut(header, ":")
					request.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
				}
				sent := time.Now()
				response, err := client.Do(request)
				if err != nil {
					atomic.AddInt64(&failures, 1)
					continue
				}
				io.Copy(io.Discard, response.Body)
				response.Body.Close()
				answered := time.Now()
				mu.Lock()
				fmt.Fprintf(out, "%.6f,%d,%.6f\n", answered.Sub(sent).Seconds(), response.StatusCode, sent.Sub(start).Seconds())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	out.Flush()
	fmt.Fprintf(os.Stderr, "transport-errors %d\n", failures)
}
