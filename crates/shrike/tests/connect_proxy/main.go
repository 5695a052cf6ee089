// A CONNECT proxy on Go's own servers, sharing no code with Shrike, for the tunnel tests:
// HTTP/2 CONNECT (RFC 9113 §8.5) over h2c with prior knowledge, or over TLS with ALPN h2 when
// given a certificate. It tunnels to loopback only, refuses the ports in -deny with 403, and
// serves its counts at GET /stats: tunnels opened, TCP and QUIC connections accepted (so a
// test can see many tunnels ride one connection).
//
// It also proxies UDP (CONNECT-UDP, RFC 9298) over HTTP/2's extended CONNECT (RFC 8441,
// :protocol connect-udp, which Go's server offers with GODEBUG=http2xconnect=1): datagrams
// travel as DATAGRAM capsules (RFC 9297) on the request and response bodies, to and from a
// loopback UDP socket. Capsules are encoded by hand here, from the RFCs, not by Shrike's code.
//
// With -h3 (and a certificate) it serves HTTP/3 too, on quic-go, on the same port number over
// UDP: CONNECT request streams (RFC 9114 §4.4; quic-go refuses a CONNECT with :path) through
// the same handler, and CONNECT-UDP with HTTP/3 datagrams through masque-go,
// quic-go's MASQUE library.
//
// usage: connect_proxy [-deny PORT,PORT] [-cert FILE -key FILE [-h3]]; prints its address
// first. With -via or -masque it is a client instead (client.go, masque_client.go).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/quic-go/masque-go"
	"github.com/yosida95/uritemplate/v3"
)

func main() {
	deny := flag.String("deny", "", "comma-separated destination ports refused with 403")
	cert := flag.String("cert", "", "TLS certificate (PEM); without it, h2c")
	key := flag.String("key", "", "TLS key (PEM)")
	h3 := flag.Bool("h3", false, "also serve HTTP/3 on the same port number (UDP); needs -cert")
	masqueVia := flag.String("masque", "", "client: an HTTP/3 proxy's https:// URL, for CONNECT-UDP")
	via := flag.String("via", "", "client: the proxy's URL (http:// for h2c, https://)")
	ca := flag.String("ca", "", "client: the proxy's CA (PEM)")
	target := flag.String("target", "", "client: HOST:PORT of an HTTP/1.1 server")
	nTunnels := flag.Int("tunnels", 10, "client: CONNECT tunnels")
	nRequests := flag.Int("requests", 10, "client: requests per tunnel")
	nDatagrams := flag.Int("datagrams", 0, "client: datagrams through one CONNECT-UDP tunnel")
	flag.Parse()
	if *via != "" {
		runClient(*via, *ca, *target, *nTunnels, *nRequests, *nDatagrams)
		return
	}
	if *masqueVia != "" {
		runMasqueClient(*masqueVia, *ca, *nDatagrams)
		return
	}
	denied := map[string]bool{}
	for _, p := range strings.Split(*deny, ",") {
		if p != "" {
			denied[p] = true
		}
	}
	var tunnels, conns, quicConns, h2, udpTunnels, datagrams atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := ln.Addr().String()
	var masqueProxy masque.Proxy
	template := uritemplate.MustNew("https://" + addr +
		"/.well-known/masque/udp/{target_host}/{target_port}/")
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			if r.URL.Path == "/stats" {
				fmt.Fprintf(w, `{"tunnels":%d,"connections":%d,"quic_connections":%d,`+
					`"h2_requests":%d,"udp_tunnels":%d,"datagrams_to_target":%d}`,
					tunnels.Load(), conns.Load(), quicConns.Load(), h2.Load(),
					udpTunnels.Load(), datagrams.Load())
				return
			}
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		if r.ProtoMajor == 2 {
			h2.Add(1)
		}
		if r.ProtoMajor == 3 && r.Proto == "connect-udp" {
			masqueUDP(w, r, template, &masqueProxy, denied, &udpTunnels)
			return
		}
		if r.Header.Get(":protocol") == "connect-udp" {
			connectUDP(w, r, denied, &udpTunnels, &datagrams)
			return
		}
		host, port, err := net.SplitHostPort(r.Host)
		if err != nil || (host != "127.0.0.1" && host != "localhost") {
			http.Error(w, "loopback only", http.StatusForbidden)
			return
		}
		if denied[port] {
			http.Error(w, "denied", http.StatusForbidden)
			return
		}
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer up.Close()
		tunnels.Add(1)
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		if err := rc.Flush(); err != nil {
			return
		}
		go func() {
			io.Copy(up, r.Body)
			up.(*net.TCPConn).CloseWrite()
		}()
		buf := make([]byte, 32*1024)
		for {
			n, err := up.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				if rc.Flush() != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	srv := &http.Server{
		Handler: handler,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true)
	srv.Protocols = &protocols
	fmt.Println(addr)
	if *h3 {
		go serveH3(ln.Addr().(*net.TCPAddr).Port, *cert, *key, handler, &quicConns)
	}
	if *cert != "" {
		err = srv.ServeTLS(ln, *cert, *key)
	} else {
		err = srv.Serve(ln)
	}
	log.Fatal(err)
}

// connectUDP serves one CONNECT-UDP tunnel: /.well-known/masque/udp/{host}/{port}/.
func connectUDP(w http.ResponseWriter, r *http.Request, denied map[string]bool,
	tunnels, datagrams *atomic.Int64) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) != 5 || parts[0] != ".well-known" || parts[1] != "masque" || parts[2] != "udp" {
		http.Error(w, "not a CONNECT-UDP path", http.StatusBadRequest)
		return
	}
	host, err := url.PathUnescape(parts[3])
	port := parts[4]
	if err != nil || (host != "127.0.0.1" && host != "localhost" && host != "::1") {
		http.Error(w, "loopback only", http.StatusForbidden)
		return
	}
	if denied[port] {
		http.Error(w, "denied", http.StatusForbidden)
		return
	}
	up, err := net.Dial("udp", net.JoinHostPort(host, port))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer up.Close()
	tunnels.Add(1)
	w.Header().Set("Capsule-Protocol", "?1")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	// Client to target: DATAGRAM capsules (type 0) whose payload is context id 0 and a UDP
	// payload; other capsules and contexts are skipped, as RFC 9297 says.
	go func() {
		defer up.Close()
		br := bufio.NewReader(r.Body)
		for {
			kind, err := readVarint(br)
			if err != nil {
				return
			}
			n, err := readVarint(br)
			if err != nil {
				return
			}
			payload := make([]byte, n)
			if _, err := io.ReadFull(br, payload); err != nil {
				return
			}
			if kind != 0 || len(payload) == 0 || payload[0] != 0 {
				continue
			}
			if _, err := up.Write(payload[1:]); err == nil {
				datagrams.Add(1)
			}
		}
	}()
	buf := make([]byte, 65536)
	for {
		n, err := up.Read(buf)
		if err != nil {
			return
		}
		capsule := appendVarint(nil, 0)
		capsule = appendVarint(capsule, uint64(n+1))
		capsule = append(capsule, 0)
		capsule = append(capsule, buf[:n]...)
		if _, err := w.Write(capsule); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// appendVarint appends v as a QUIC variable-length integer (RFC 9000 §16).
func appendVarint(b []byte, v uint64) []byte {
	switch {
	case v < 1<<6:
		return append(b, byte(v))
	case v < 1<<14:
		return append(b, byte(v>>8)|0x40, byte(v))
	case v < 1<<30:
		return append(b, byte(v>>24)|0x80, byte(v>>16), byte(v>>8), byte(v))
	default:
		return append(b, byte(v>>56)|0xc0, byte(v>>48), byte(v>>40), byte(v>>32),
			byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
}

func readVarint(r *bufio.Reader) (uint64, error) {
	first, err := r.ReadByte()
	if err != nil {
		return 0, err
	}
	v := uint64(first & 0x3f)
	for i := 1; i < 1<<(first>>6); i++ {
		b, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		v = v<<8 | uint64(b)
	}
	return v, nil
}
