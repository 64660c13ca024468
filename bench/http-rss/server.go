// server.go — bench/http-rss's Go server: an app behind idemhttp whose POST answers
// Response-Bytes bytes of 'x' in 64 KiB writes. IDEM_ADDRESS, IDEM_TENANT, PORT.
package main

import (
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"

	idem "idem.dev/client"
	"idem.dev/client/idemhttp"
)

func main() {
	c, err := idem.Connect(idem.Options{Address: os.Getenv("IDEM_ADDRESS"), Tenant: os.Getenv("IDEM_TENANT")})
	if err != nil {
		log.Fatal(err)
	}
	mw, err := idemhttp.New(idemhttp.Options{Client: c, Service: "http-rss"})
	if err != nil {
		log.Fatal(err)
	}
	piece := []byte(strings.Repeat("x", 64*1024))
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.Header.Get("Response-Bytes"), 10, 64)
		w.Header().Set("Content-Type", "application/octet-stream")
		for n > 0 {
			k := int64(len(piece))
			if n < k {
				k = n
			}
			if _, err := w.Write(piece[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	log.Fatal(http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), mw.Wrap(app)))
}
