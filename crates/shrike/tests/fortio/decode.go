// Decodes `shrike transform --output-format fortio` output (stdin) into structs that mirror
// fortio's Go types field for field (periodic.RunnerResults, fhttp.HTTPRunnerResults,
// stats.HistogramData), as fortio's report UI and tools do. A field whose JSON type does not
// match the Go type fails the decode; a key fortio does not know, or a field the output lacks,
// is reported. Prints the decoded struct re-encoded as JSON plus a few derived numbers.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"time"
)

type Interval struct {
	Start float64
	End   float64
}

type Bucket struct {
	Interval
	Percent float64
	Count   int64
}

type Percentile struct {
	Percentile float64
	Value      float64
}

type HistogramData struct {
	Count       int64
	Min         float64
	Max         float64
	Sum         float64
	Avg         float64
	StdDev      float64
	Data        []Bucket
	Percentiles []Percentile
}

type RunnerResults struct {
	RunType                 string
	Labels                  string
	StartTime               time.Time
	RequestedQPS            string
	RequestedDuration       string
	ActualQPS               float64
	ActualDuration          time.Duration
	NumThreads              int
	Version                 string
	DurationHistogram       *HistogramData
	ErrorsDurationHistogram *HistogramData
	Exactly                 int64
	Jitter                  bool
	Uniform                 bool
	NoCatchUp               bool
	RunID                   int64
	ID                      string
}

type HTTPRunnerResults struct {
	RunnerResults
	RetCodes      map[int]int64
	Sizes         *HistogramData
	HeaderSizes   *HistogramData
	URL           string
	SocketCount   int
	BytesSent     int64
	BytesReceived int64
	AbortOn       int
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}

func keys(m map[string]json.RawMessage) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	sort.Strings(k)
	return k
}

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail("read: %v", err)
	}
	var r HTTPRunnerResults
	if err := json.NewDecoder(bytes.NewReader(in)).Decode(&r); err != nil {
		fail("decode into fortio's types: %v", err)
	}
	// Same key set both ways: nothing fortio would ignore, nothing it would miss.
	var raw, back map[string]json.RawMessage
	if err := json.Unmarshal(in, &raw); err != nil {
		fail("raw: %v", err)
	}
	re, _ := json.Marshal(r)
	_ = json.Unmarshal(re, &back)
	if fmt.Sprint(keys(raw)) != fmt.Sprint(keys(back)) {
		fail("keys differ:\n output: %v\n fortio: %v", keys(raw), keys(back))
	}
	var bucketSum int64
	for _, b := range r.DurationHistogram.Data {
		bucketSum += b.Count
	}
	derived := map[string]any{
		"StartUnixNano":      r.StartTime.UnixNano(),
		"ActualDurationSecs": r.ActualDuration.Seconds(),
		"BucketSum":          bucketSum,
		"RetCode200":         r.RetCodes[200],
	}
	d, _ := json.Marshal(derived)
	fmt.Println(string(re))
	fmt.Println(string(d))
}
