// A plain quic-go HTTP/3 client for Shrike's interoperability tests: it GETs one URL n times
// over one connection and prints a JSON tally of what came back, so the test can check
// `shrike serve --http3` against a client that shares none of Shrike's code.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/quic-go/quic-go/http3"
)

type headers []string

func (h *headers) String() string     { return strings.Join(*h, ", ") }
func (h *headers) Set(v string) error { *h = append(*h, v); return nil }

type tally struct {
	Statuses    map[string]int `json:"statuses"`
	BodyLengths map[string]int `json:"body_lengths"`
	Protocols   map[string]int `json:"protocols"`
	ServedBy    map[string]int `json:"served_by"`
	Errors      []string       `json:"errors"`
}

func main() {
	url := flag.String("url", "", "URL to GET")
	n := flag.Int("n", 10, "number of requests")
	caFile := flag.String("ca", "", "PEM certificate to trust")
	serverName := flag.String("server-name", "", "TLS server name, when the URL holds an IP")
	var hs headers
	flag.Var(&hs, "header", "request header 'name: value' (repeatable)")
	flag.Parse()

	pem, err := os.ReadFile(*caFile)
	if err != nil {
		log.Fatalf("reading CA: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		log.Fatalf("no certificate in %s", *caFile)
	}
	transport := &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: *serverName}}
	defer transport.Close()
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}

	t := tally{map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}, []string{}}
	for i := 0; i < *n; i++ {
		req, err := http.NewRequest(http.MethodGet, *url, nil)
		if err != nil {
			log.Fatalf("request: %v", err)
		}
		for _, h := range hs {
			name, value, ok := strings.Cut(h, ":")
			if !ok {
				log.Fatalf("header %q has no ':'", h)
			}
			req.Header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Errors = append(t.Errors, err.Error())
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Errors = append(t.Errors, err.Error())
		}
		t.Statuses[strconv.Itoa(resp.StatusCode)]++
		t.BodyLengths[strconv.Itoa(len(body))]++
		t.Protocols[resp.Proto]++
		t.ServedBy[resp.Header.Get("server")]++
	}
	out, err := json.Marshal(t)
	if err != nil {
		log.Fatalf("encoding: %v", err)
	}
	fmt.Println(string(out))
}
