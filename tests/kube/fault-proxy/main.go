// Command fault-proxy is a test fixture, not part of podres: a reverse proxy
// put in front of a real kube-apiserver that injects the failures
// podres-syncer must survive (409 conflicts, 429 with Retry-After, 5xx,
// stalls, dropped, stalled and expired watches) on chosen verbs, resources
// and user agents. Everything it does not fault is forwarded unchanged, so
// the behaviour seen by the client is otherwise the real API server's.
//
// See tests/fixtures/fault-proxy.md for the command line, the --faults
// grammar and the admin API under /_proxy/.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ------------------------------------------------------------ request info

// reqInfo is what the apiserver's RequestInfo would say about a request:
// the faults and the counters are keyed by it.
type reqInfo struct {
	resourceRequest bool
	verb            string // get list watch create update patch delete deletecollection; HTTP method for non-resource
	group           string
	resource        string // as counted: "devicebindings", "devicebindings/status"; the path for non-resource
	baseResource    string // "devicebindings"
	name            string
}

// classify mirrors k8s.io/apiserver/pkg/endpoints/request.NewRequestInfo.
func classify(method, path string, query url.Values) reqInfo {
	nonResource := reqInfo{verb: strings.ToLower(method), resource: path}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) < 3 {
		return nonResource
	}
	info := reqInfo{resourceRequest: true}
	switch parts[0] {
	case "api": // /api/v1/...: the core group
		parts = parts[1:]
	case "apis": // /apis/GROUP/VERSION/...
		if len(parts) < 4 {
			return nonResource // /apis/GROUP/VERSION is discovery
		}
		info.group = parts[1]
		parts = parts[2:]
	default:
		return nonResource
	}
	parts = parts[1:] // the version

	switch method {
	case http.MethodPost:
		info.verb = "create"
	case http.MethodGet, http.MethodHead:
		info.verb = "get"
	case http.MethodPut:
		info.verb = "update"
	case http.MethodPatch:
		info.verb = "patch"
	case http.MethodDelete:
		info.verb = "delete"
	}
	// The deprecated /watch/ path prefix; the real server also has /proxy/.
	if parts[0] == "watch" || parts[0] == "proxy" {
		if len(parts) < 2 {
			return nonResource // the real server answers an error
		}
		info.verb = parts[0]
		parts = parts[1:]
	}
	// /namespaces/NS/RESOURCE/...; but /namespaces/NS and its own
	// subresources (status, finalize) are the namespaces resource.
	if parts[0] == "namespaces" && len(parts) > 2 && parts[2] != "status" && parts[2] != "finalize" {
		parts = parts[2:]
	}
	info.baseResource = parts[0]
	info.resource = parts[0]
	if len(parts) >= 2 {
		info.name = parts[1]
	}
	if len(parts) >= 3 && info.verb != "proxy" {
		info.resource += "/" + parts[2]
	}
	if info.name == "" && info.verb == "get" {
		info.verb = "list"
		if v, ok := query["watch"]; ok && len(v) > 0 && v[0] != "0" && !strings.EqualFold(v[0], "false") {
			info.verb = "watch"
		}
		// A watch or list of one object by field selector names it.
		if fs := query.Get("fieldSelector"); strings.HasPrefix(fs, "metadata.name=") && !strings.Contains(fs, ",") {
			info.name = strings.TrimPrefix(fs, "metadata.name=")
		}
	}
	if info.name == "" && info.verb == "delete" {
		info.verb = "deletecollection"
	}
	return info
}

// groupResource is the apiserver's schema.GroupResource.String():
// "devicebindings.podres.dev", or "pods" for the core group.
func (i reqInfo) groupResource() string {
	if i.group == "" {
		return i.baseResource
	}
	return i.baseResource + "." + i.group
}

// ------------------------------------------------------------ fault rules

var faultKinds = []string{"401", "403", "404", "409", "410", "429", "500", "502", "503", "504",
	"too-large", "stall", "watch-drop", "watch-stall"}

var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// Verbs a rule may name: the Kubernetes ones, plus the lower-cased HTTP
// methods that non-resource requests (/apis, /version) are classified by.
var knownVerbs = map[string]bool{"get": true, "list": true, "watch": true, "create": true,
	"update": true, "patch": true, "delete": true, "deletecollection": true,
	"post": true, "put": true, "head": true, "options": true}

// fault is one rule of --faults. Only Remaining changes after parsing, and
// only under proxy.mu.
type fault struct {
	Kind       string   `json:"kind"`
	Spec       string   `json:"spec"`
	Remaining  *int     `json:"remaining"` // nil: unlimited
	Verbs      []string `json:"verbs"`     // nil: any
	Resources  []string `json:"resources"`
	UserAgents []string `json:"userAgents"` // prefixes
	RetryAfter *int     `json:"retryAfter"` // nil: no Retry-After
	Body       string   `json:"body"`       // text or status (429)
	After      float64  `json:"after"`
	Seconds    *float64 `json:"seconds"` // nil: until the stream ends (watch-stall)
}

func isStatusKind(k string) bool {
	return k != "stall" && k != "watch-drop" && k != "watch-stall"
}

// parseFaults parses a SPEC: rules separated by ',' or ';', each
// KIND[:KEY=VALUE]... (tests/fixtures/fault-proxy.md).
func parseFaults(spec string) ([]*fault, error) {
	var out []*fault
	for _, part := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == ';' }) {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		f, err := parseFault(part)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func parseFault(spec string) (*fault, error) {
	opts := strings.Split(spec, ":")
	f := &fault{Kind: strings.TrimSpace(opts[0]), Spec: spec, Body: "status"}
	known := false
	for _, k := range faultKinds {
		known = known || k == f.Kind
	}
	if !known {
		return nil, fmt.Errorf("unknown fault %q (one of %s)", f.Kind, strings.Join(faultKinds, ", "))
	}
	switch f.Kind {
	case "429":
		f.RetryAfter, f.Body = intp(1), "text" // the real max-in-flight reply
	case "too-large":
		f.RetryAfter = intp(1) // the watch cache's resourceVersionTooHighRetrySeconds
	case "409":
		f.Remaining, f.Verbs = intp(1), []string{"patch", "update"}
	case "stall":
		f.Seconds = floatp(3600)
	}
	for _, opt := range opts[1:] {
		k, v, ok := strings.Cut(opt, "=")
		if !ok {
			return nil, fmt.Errorf("fault %q: option %q is not KEY=VALUE", spec, opt)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		var err error
		switch k {
		case "count":
			var n int
			if n, err = strconv.Atoi(v); err == nil && n < 0 {
				err = errors.New("negative")
			}
			f.Remaining = &n
		case "verbs":
			f.Verbs = nil
			for _, x := range splitList(v) {
				switch {
				case x == "write":
					f.Verbs = append(f.Verbs, writeVerbs...)
				case knownVerbs[x]:
					f.Verbs = append(f.Verbs, x)
				default:
					err = fmt.Errorf("unknown verb %q", x)
				}
			}
			f.Verbs = sortedSet(f.Verbs)
		case "resource":
			f.Resources = sortedSet(splitList(v))
		case "user-agent":
			f.UserAgents = sortedSet(splitList(v))
		case "retry-after":
			if v == "" || v == "none" {
				f.RetryAfter = nil
				break
			}
			var n int
			if n, err = strconv.Atoi(v); err == nil && n < 0 {
				err = errors.New("negative")
			}
			f.RetryAfter = &n
		case "body":
			if v != "text" && v != "status" {
				err = errors.New("must be text or status")
			}
			f.Body = v
		case "after", "seconds":
			var s float64
			if s, err = strconv.ParseFloat(v, 64); err == nil && (s < 0 || s != s) {
				err = errors.New("must be >= 0")
			}
			if k == "after" {
				f.After = s
			} else {
				f.Seconds = &s
			}
		default:
			err = errors.New("unknown option")
		}
		if err != nil {
			return nil, fmt.Errorf("fault %q: %s=%q: %v", spec, k, v, err)
		}
		if (k == "verbs" || k == "resource" || k == "user-agent") && v == "" {
			return nil, fmt.Errorf("fault %q: %s is empty", spec, k)
		}
	}
	if f.Kind == "watch-drop" || f.Kind == "watch-stall" {
		f.Verbs = []string{"watch"} // they act on watch streams only
	}
	return f, nil
}

func (f *fault) matches(info reqInfo, userAgent string) bool {
	if f.Remaining != nil && *f.Remaining <= 0 {
		return false
	}
	if f.Verbs != nil && !contains(f.Verbs, info.verb) {
		return false
	}
	// "devicebindings" also matches devicebindings/status.
	if f.Resources != nil && !contains(f.Resources, info.resource) &&
		!(info.resourceRequest && contains(f.Resources, info.baseResource)) {
		return false
	}
	if f.UserAgents != nil && !hasAnyPrefix(userAgent, f.UserAgents) {
		return false
	}
	return true
}

// ------------------------------------------------------------ Kubernetes Status

// status is metav1.Status, its fields in the order the real server writes them.
type status struct {
	Kind       string         `json:"kind"`
	APIVersion string         `json:"apiVersion"`
	Metadata   struct{}       `json:"metadata"`
	Status     string         `json:"status"`
	Message    string         `json:"message,omitempty"`
	Reason     string         `json:"reason,omitempty"`
	Details    *statusDetails `json:"details,omitempty"`
	Code       int            `json:"code"`
}

type statusDetails struct {
	Name              string        `json:"name,omitempty"`
	Group             string        `json:"group,omitempty"`
	Kind              string        `json:"kind,omitempty"`
	Causes            []statusCause `json:"causes,omitempty"`
	RetryAfterSeconds int           `json:"retryAfterSeconds,omitempty"`
}

// watchEvent is one line of a watch stream.
type watchEvent struct {
	Type   string  `json:"type"`
	Object *status `json:"object"`
}

type statusCause struct {
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

const injected = "injected fault (fault-proxy)"

func newStatus(code int, reason, message string, details *statusDetails) *status {
	return &status{Kind: "Status", APIVersion: "v1", Status: "Failure", Message: message,
		Reason: reason, Details: details, Code: code}
}

// objectDetails is the details block the apiserver's NewConflict,
// NewNotFound and NewForbidden give for a resource request.
func objectDetails(info reqInfo) *statusDetails {
	if !info.resourceRequest {
		return nil
	}
	return &statusDetails{Name: info.name, Group: info.group, Kind: info.baseResource}
}

// tooLarge is storage.NewTooLargeResourceVersionError: what the watch cache
// answers for a resourceVersion newer than it has after waiting 3 s.
func tooLarge(rv string) *status {
	want, err := strconv.ParseUint(rv, 10, 64)
	if err != nil || want == 0 {
		want = 2
	}
	return newStatus(http.StatusGatewayTimeout, "Timeout",
		fmt.Sprintf("Timeout: Too large resource version: %d, current: %d", want, want-1),
		&statusDetails{Causes: []statusCause{{Reason: "ResourceVersionTooLarge", Message: "Too large resource version"}}})
}

// faultStatus builds the Status a status rule answers with. The messages are
// the apiserver's own for that reason where it has one.
func faultStatus(f *fault, info reqInfo, rv string) *status {
	retry := 0
	if f.RetryAfter != nil {
		retry = *f.RetryAfter
	}
	gr, named := info.groupResource(), info.resourceRequest && info.name != ""
	var st *status
	switch f.Kind {
	case "401":
		st = newStatus(401, "Unauthorized", "Unauthorized", nil)
	case "403":
		msg := "forbidden: " + injected
		if named {
			msg = fmt.Sprintf("%s %q is forbidden: %s", gr, info.name, injected)
		} else if info.resourceRequest {
			msg = fmt.Sprintf("%s is forbidden: %s", gr, injected)
		}
		st = newStatus(403, "Forbidden", msg, objectDetails(info))
	case "404":
		msg := "the server could not find the requested resource"
		if named {
			msg = fmt.Sprintf("%s %q not found", gr, info.name)
		}
		st = newStatus(404, "NotFound", msg, objectDetails(info))
	case "409":
		const modified = "the object has been modified; please apply your changes to the latest version and try again"
		msg := "Operation cannot be fulfilled: " + modified
		if info.resourceRequest {
			msg = fmt.Sprintf("Operation cannot be fulfilled on %s %q: %s", gr, info.name, modified)
		}
		st = newStatus(409, "Conflict", msg, objectDetails(info))
	case "410":
		st = newStatus(410, "Expired", "too old resource version: 1 (2)", nil)
	case "429":
		st = newStatus(429, "TooManyRequests", "Too many requests, please try again later.",
			&statusDetails{Causes: []statusCause{{Reason: "ServerTimeout",
				Message: "The server has received too many requests and has asked us to try again later"}}})
	case "500":
		st = newStatus(500, "InternalError", "Internal error occurred: "+injected,
			&statusDetails{Causes: []statusCause{{Message: injected}}})
	case "502":
		st = newStatus(502, "InternalError", "Bad Gateway: "+injected, nil)
	case "503":
		st = newStatus(503, "ServiceUnavailable", "the server is currently unable to handle the request", nil)
	case "504":
		st = newStatus(504, "Timeout", "Timeout: request did not complete within the allowed duration", nil)
	case "too-large":
		st = tooLarge(rv)
	}
	// The errors a client may retry carry the delay in the body too (the
	// header is set by the caller, as the apiserver's writer does).
	switch f.Kind {
	case "429", "500", "502", "503", "504", "too-large":
		if retry > 0 {
			if st.Details == nil {
				st.Details = &statusDetails{}
			}
			st.Details.RetryAfterSeconds = retry
		}
	}
	return st
}

// marshal is json.Marshal without HTML escaping, as the apiserver writes.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return b.Bytes() // ends with '\n', as the apiserver's watch lines do
}

// ------------------------------------------------------------ the proxy

type countKey struct {
	verb, resource string
	code           int
	userAgent      string
}

type requestRecord struct {
	Start     float64 `json:"start"` // arrival, epoch seconds
	End       float64 `json:"end"`   // answer (response headers sent)
	Method    string  `json:"method"`
	Path      string  `json:"path"` // with the query
	Verb      string  `json:"verb"`
	Resource  string  `json:"resource"`
	Code      int     `json:"code"` // 0: the client went away before any answer
	UserAgent string  `json:"userAgent"`
	Fault     string  `json:"fault,omitempty"` // kinds of the rules applied
}

const keepRequests = 2000

// watchStream is an open watch, so /_proxy/watches/drop can end it.
type watchStream struct {
	drop chan struct{}
	once sync.Once
}

type proxy struct {
	upstream  *url.URL
	transport http.RoundTripper
	verbose   bool

	mu       sync.Mutex
	faults   []*fault
	counts   map[countKey]int
	requests []requestRecord
	watches  map[*watchStream]bool
}

func newProxy(upstream *url.URL, transport http.RoundTripper, faults []*fault) *proxy {
	return &proxy{upstream: upstream, transport: transport, faults: faults,
		counts: map[countKey]int{}, watches: map[*watchStream]bool{}}
}

// take returns the first live rule of the wanted kinds matching the
// request, and uses one of its count.
func (p *proxy) take(want func(kind string) bool, info reqInfo, userAgent string) *fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.faults {
		if want(f.Kind) && f.matches(info, userAgent) {
			if f.Remaining != nil {
				*f.Remaining--
			}
			return f
		}
	}
	return nil
}

func kindIs(k string) func(string) bool { return func(x string) bool { return x == k } }

// exchange is one proxied request.
type exchange struct {
	p      *proxy
	w      http.ResponseWriter
	r      *http.Request
	info   reqInfo
	ua     string
	start  time.Time
	faults []string
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/_proxy" || strings.HasPrefix(r.URL.Path, "/_proxy/") {
		p.admin(w, r)
		return
	}
	x := &exchange{p: p, w: w, r: r, info: classify(r.Method, r.URL.Path, r.URL.Query()),
		ua: r.UserAgent(), start: time.Now()}

	if f := p.take(kindIs("stall"), x.info, x.ua); f != nil {
		x.faults = append(x.faults, f.Kind)
		t := time.NewTimer(seconds(*f.Seconds))
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			x.answered(0) // logged, not counted: no answer was sent
			return
		}
	}
	if f := p.take(isStatusKind, x.info, x.ua); f != nil {
		x.faults = append(x.faults, f.Kind)
		x.injectStatus(f)
		return
	}
	x.forward()
}

// answered counts and logs the request; called once, just before the
// response headers go out (for a watch: when its stream starts), so a test
// that reads the counters after an answer finds that request there.
func (x *exchange) answered(code int) {
	now := time.Now()
	rec := requestRecord{Start: epoch(x.start), End: epoch(now), Method: x.r.Method,
		Path: x.r.URL.RequestURI(), Verb: x.info.verb, Resource: x.info.resource, Code: code,
		UserAgent: x.ua, Fault: strings.Join(x.faults, ",")}
	p := x.p
	p.mu.Lock()
	if code != 0 {
		p.counts[countKey{x.info.verb, x.info.resource, code, x.ua}]++
	}
	p.requests = append(p.requests, rec)
	if len(p.requests) > keepRequests {
		p.requests = p.requests[len(p.requests)-keepRequests:]
	}
	p.mu.Unlock()
	if p.verbose {
		f := ""
		if rec.Fault != "" {
			f = " fault=" + rec.Fault
		}
		log.Printf("%s %s verb=%s resource=%s code=%d %.3fs ua=%q%s", rec.Method, rec.Path,
			rec.Verb, rec.Resource, code, now.Sub(x.start).Seconds(), x.ua, f)
	}
}

func (x *exchange) injectStatus(f *fault) {
	h := x.w.Header()
	// Every real apiserver answer has it (WithCacheControl wraps even the
	// max-in-flight 429); without it kubectl's disk cache keeps a 429 for
	// /version and replays it on later runs.
	h.Set("Cache-Control", "no-cache, private")
	if f.RetryAfter != nil {
		h.Set("Retry-After", strconv.Itoa(*f.RetryAfter))
	}
	rv := x.r.URL.Query().Get("resourceVersion")
	if f.Kind == "429" && f.Body == "text" {
		// Exactly the real server's max-in-flight / priority-and-fairness reply.
		x.answered(http.StatusTooManyRequests)
		http.Error(x.w, "Too many requests, please try again later.", http.StatusTooManyRequests)
		return
	}
	st := faultStatus(f, x.info, rv)
	if x.info.verb == "watch" && (f.Kind == "410" || f.Kind == "too-large") {
		// The real server reports both on a watch as 200 and one ERROR event,
		// then ends the stream (the cacher's newErrWatcher).
		h.Del("Retry-After")
		h.Set("Content-Type", "application/json")
		x.answered(http.StatusOK)
		x.w.WriteHeader(http.StatusOK)
		x.w.Write(marshal(watchEvent{Type: "ERROR", Object: st}))
		return
	}
	x.writeStatus(st)
}

func (x *exchange) writeStatus(st *status) {
	x.w.Header().Set("Content-Type", "application/json")
	x.w.Header().Set("Cache-Control", "no-cache, private")
	x.answered(st.Code)
	x.w.WriteHeader(st.Code)
	x.w.Write(marshal(st))
}

// Hop-by-hop headers are the connection's, not the request's (RFC 9110 7.6.1).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// forward sends the request upstream as-is (Authorization included) and
// streams the answer back.
func (x *exchange) forward() {
	r := x.r
	out := r.Clone(r.Context()) // a client that goes away cancels the upstream request
	out.RequestURI = ""
	out.Host = ""
	u := *x.p.upstream
	u.Path = strings.TrimSuffix(u.Path, "/") + r.URL.Path
	u.RawPath = ""
	if r.URL.RawPath != "" {
		u.RawPath = strings.TrimSuffix(x.p.upstream.EscapedPath(), "/") + r.URL.RawPath
	}
	u.RawQuery = r.URL.RawQuery
	out.URL = &u
	removeHopHeaders(out.Header)
	if r.ContentLength == 0 {
		out.Body = nil
	}
	resp, err := x.p.transport.RoundTrip(out)
	if err != nil {
		if r.Context().Err() != nil {
			x.answered(0)
			return
		}
		x.writeStatus(newStatus(http.StatusBadGateway, "InternalError",
			"fault-proxy: upstream "+x.p.upstream.Host+": "+err.Error(), nil))
		return
	}
	defer resp.Body.Close()

	var drop, stall *fault
	var ws *watchStream
	if x.info.verb == "watch" && resp.StatusCode == http.StatusOK {
		if drop = x.p.take(kindIs("watch-drop"), x.info, x.ua); drop != nil {
			x.faults = append(x.faults, drop.Kind)
		}
		if stall = x.p.take(kindIs("watch-stall"), x.info, x.ua); stall != nil {
			x.faults = append(x.faults, stall.Kind)
		}
		ws = x.p.addWatch()
		defer x.p.removeWatch(ws)
	}

	removeHopHeaders(resp.Header)
	for k, v := range resp.Header {
		x.w.Header()[k] = v
	}
	x.answered(resp.StatusCode)
	x.w.WriteHeader(resp.StatusCode)
	x.stream(resp.Body, drop, stall, ws)
}

// stream copies the upstream body to the client, flushing every read so
// each watch event reaches the client as soon as the API server sends it.
// A dropped stream panics with http.ErrAbortHandler: the server then closes
// the connection without the chunked terminator, as a broken connection
// to a real server looks to a client.
func (x *exchange) stream(body io.ReadCloser, drop, stall *fault, ws *watchStream) {
	rc := http.NewResponseController(x.w)
	rc.Flush() // the headers: a watch client waits for them

	done := make(chan struct{})
	defer close(done)
	chunks := make(chan []byte)
	ended := make(chan error, 1)
	go func() {
		for {
			buf := make([]byte, 32<<10)
			n, err := body.Read(buf)
			if n > 0 {
				select {
				case chunks <- buf[:n]:
				case <-done:
					return
				}
			}
			if err != nil {
				ended <- err // after every chunk was taken: chunks is unbuffered
				return
			}
		}
	}()

	var dropAt, stallEnd <-chan time.Time
	var dropAll chan struct{} // nil (never ready) unless a watch
	if ws != nil {
		dropAll = ws.drop
	}
	if drop != nil {
		if drop.After <= 0 {
			panic(http.ErrAbortHandler)
		}
		t := time.NewTimer(seconds(drop.After))
		defer t.Stop()
		dropAt = t.C
	}
	stalled := stall != nil
	var withheld []byte
	if stall != nil && stall.Seconds != nil {
		t := time.NewTimer(seconds(*stall.Seconds))
		defer t.Stop()
		stallEnd = t.C
	}
	for {
		select {
		case b := <-chunks:
			if stalled {
				withheld = append(withheld, b...)
				continue
			}
			if _, err := x.w.Write(b); err != nil {
				return // the client went away
			}
			rc.Flush()
		case <-stallEnd:
			stalled = false
			if len(withheld) > 0 {
				if _, err := x.w.Write(withheld); err != nil {
					return
				}
				withheld = nil
				rc.Flush()
			}
		case err := <-ended:
			if err == io.EOF {
				// A clean end, also during a watch-stall: the withheld events
				// are not sent; the client watches again from the last
				// resourceVersion it saw, and gets them from the server.
				return
			}
			// The API server's connection broke: pass that on.
			panic(http.ErrAbortHandler)
		case <-dropAt:
			panic(http.ErrAbortHandler)
		case <-dropAll:
			panic(http.ErrAbortHandler)
		case <-x.r.Context().Done():
			return
		}
	}
}

func (p *proxy) addWatch() *watchStream {
	ws := &watchStream{drop: make(chan struct{})}
	p.mu.Lock()
	p.watches[ws] = true
	p.mu.Unlock()
	return ws
}

func (p *proxy) removeWatch(ws *watchStream) {
	p.mu.Lock()
	delete(p.watches, ws)
	p.mu.Unlock()
}

// dropWatches ends every open watch stream abruptly.
func (p *proxy) dropWatches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for ws := range p.watches {
		ws.once.Do(func() { close(ws.drop); n++ })
	}
	return n
}

// ------------------------------------------------------------ admin API

// admin serves /_proxy/...: never forwarded, counted or faulted, no auth.
func (p *proxy) admin(w http.ResponseWriter, r *http.Request) {
	reply := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		w.Write(marshal(v))
	}
	bad := func(msg string) { reply(http.StatusBadRequest, map[string]any{"ok": false, "error": msg}) }
	ok := map[string]any{"ok": true}
	q := r.URL.Query()
	route := r.Method + " " + strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/_proxy"), "/")

	switch route {
	case "GET /state":
		p.mu.Lock()
		st := map[string]any{"watches": len(p.watches), "upstream": p.upstream.String(),
			"faults": len(p.liveFaults())}
		p.mu.Unlock()
		reply(200, st)

	case "GET /faults":
		p.mu.Lock()
		defer p.mu.Unlock()
		reply(200, map[string]any{"faults": p.liveFaults()})
	case "PUT /faults", "POST /faults":
		spec, err := readSpec(r)
		if err != nil {
			bad(err.Error())
			return
		}
		fs, err := parseFaults(spec)
		if err != nil {
			bad(err.Error())
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if r.Method == http.MethodPut {
			p.faults = fs
		} else {
			p.faults = append(p.faults, fs...)
		}
		reply(200, map[string]any{"ok": true, "faults": p.liveFaults()})
	case "DELETE /faults":
		p.mu.Lock()
		p.faults = nil
		p.mu.Unlock()
		reply(200, ok)

	case "GET /counters":
		reply(200, p.counters(q))
	case "DELETE /counters", "POST /counters/reset":
		p.mu.Lock()
		p.counts = map[countKey]int{}
		p.mu.Unlock()
		reply(200, ok)

	case "GET /requests":
		p.mu.Lock()
		reqs := append([]requestRecord{}, p.requests...)
		p.mu.Unlock()
		reply(200, map[string]any{"requests": reqs})
	case "DELETE /requests":
		p.mu.Lock()
		p.requests = nil
		p.mu.Unlock()
		reply(200, ok)

	case "POST /watches/drop":
		reply(200, map[string]any{"dropped": p.dropWatches()})

	default:
		reply(http.StatusNotFound, map[string]any{"ok": false,
			"error": "no such admin endpoint: " + r.Method + " " + r.URL.Path})
	}
}

// liveFaults: the rules not used up. Call with p.mu held.
func (p *proxy) liveFaults() []*fault {
	out := []*fault{}
	for _, f := range p.faults {
		if f.Remaining == nil || *f.Remaining > 0 {
			c := *f
			if f.Remaining != nil {
				c.Remaining = intp(*f.Remaining) // a snapshot, not shared
			}
			out = append(out, &c)
		}
	}
	return out
}

// readSpec takes {"spec":"SPEC"}, a JSON string, or SPEC as plain text.
func readSpec(r *http.Request) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	switch {
	case strings.HasPrefix(t, "{"):
		var v struct {
			Spec *string `json:"spec"`
		}
		if err := json.Unmarshal(b, &v); err != nil || v.Spec == nil {
			return "", errors.New(`the body is a fault spec: plain text, or {"spec": "..."}`)
		}
		return *v.Spec, nil
	case strings.HasPrefix(t, `"`):
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	return t, nil
}

// counters answers GET /_proxy/counters with its filters (comma-separated
// values; code=2xx matches a class; user-agent takes prefixes).
func (p *proxy) counters(q url.Values) map[string]any {
	list := func(k string) []string {
		if q.Get(k) == "" {
			return nil
		}
		return splitComma(q.Get(k))
	}
	verbs, resources, codes, agents := list("verb"), list("resource"), list("code"), list("user-agent")
	codeOK := func(code int) bool {
		c := strconv.Itoa(code)
		for _, x := range codes {
			if x == c || len(x) == 3 && strings.HasSuffix(strings.ToLower(x), "xx") && x[0] == c[0] {
				return true
			}
		}
		return codes == nil
	}

	type flatKey struct {
		verb, resource string
		code           int
	}
	sum := map[flatKey]int{}
	p.mu.Lock()
	for k, n := range p.counts {
		if (verbs == nil || contains(verbs, k.verb)) && (resources == nil || contains(resources, k.resource)) &&
			codeOK(k.code) && (agents == nil || hasAnyPrefix(k.userAgent, agents)) {
			sum[flatKey{k.verb, k.resource, k.code}] += n
		}
	}
	p.mu.Unlock()

	keys := make([]flatKey, 0, len(sum))
	for k := range sum {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.verb != b.verb {
			return a.verb < b.verb
		}
		if a.resource != b.resource {
			return a.resource < b.resource
		}
		return a.code < b.code
	})
	total := 0
	nested := map[string]map[string]map[string]int{}
	flat := []map[string]any{}
	for _, k := range keys {
		n := sum[k]
		total += n
		if nested[k.verb] == nil {
			nested[k.verb] = map[string]map[string]int{}
		}
		if nested[k.verb][k.resource] == nil {
			nested[k.verb][k.resource] = map[string]int{}
		}
		nested[k.verb][k.resource][strconv.Itoa(k.code)] = n
		flat = append(flat, map[string]any{"verb": k.verb, "resource": k.resource, "code": k.code, "count": n})
	}
	return map[string]any{"total": total, "counts": nested, "requests": flat}
}

// ------------------------------------------------------------ small helpers

func intp(n int) *int                 { return &n }
func floatp(f float64) *float64       { return &f }
func epoch(t time.Time) float64       { return float64(t.UnixNano()) / 1e9 }
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func splitList(v string) []string  { return splitOn(v, "|") }
func splitComma(v string) []string { return splitOn(v, ",") }

func splitOn(v, sep string) []string {
	var out []string
	for _, x := range strings.Split(v, sep) {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func sortedSet(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, x := range in {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}

// writeAtomic writes via a temporary file and a rename, so a test polling
// for the file never reads it half-written.
func writeAtomic(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".fault-proxy-*")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ------------------------------------------------------------ main

func usage() {
	fmt.Fprintf(os.Stderr, `usage: fault-proxy --listen HOST:PORT --upstream URL [--faults SPEC]
    [--tls-cert F --tls-key F] [--upstream-ca F] [--port-file F] [-v]

A fault-injecting reverse proxy in front of a kube-apiserver (test fixture).
See tests/fixtures/fault-proxy.md.

`)
	flag.PrintDefaults()
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "fault-proxy: "+format+"\n", args...)
	os.Exit(code)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "`HOST:PORT` to listen on (port 0 picks a free port)")
	upstreamFlag := flag.String("upstream", "", "the API server's `URL`, e.g. https://127.0.0.1:6443")
	faultSpec := flag.String("faults", "", "fault rules active from the start (`SPEC`)")
	tlsCert := flag.String("tls-cert", "", "serve HTTPS with this certificate `FILE` (PEM)")
	tlsKey := flag.String("tls-key", "", "the key `FILE` of --tls-cert (PEM)")
	upstreamCA := flag.String("upstream-ca", "", "CA `FILE` (PEM) that verifies the upstream (default: system roots)")
	portFile := flag.String("port-file", "", "write the bound port to `FILE` once listening")
	verbose := flag.Bool("v", false, "log every request to stderr")
	flag.Usage = usage
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("fault-proxy: ")

	if flag.NArg() > 0 {
		fail(2, "unexpected argument %q", flag.Arg(0))
	}
	up, err := url.Parse(*upstreamFlag)
	if *upstreamFlag == "" || err != nil || (up.Scheme != "http" && up.Scheme != "https") || up.Host == "" {
		fail(2, "--upstream: want http(s)://HOST:PORT, got %q", *upstreamFlag)
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		fail(2, "--tls-cert and --tls-key go together")
	}
	faults, err := parseFaults(*faultSpec)
	if err != nil {
		fail(2, "--faults: %v", err)
	}

	upTLS := &tls.Config{MinVersion: tls.VersionTLS12}
	if *upstreamCA != "" {
		pem, err := os.ReadFile(*upstreamCA)
		if err != nil {
			fail(2, "--upstream-ca: %v", err)
		}
		upTLS.RootCAs = x509.NewCertPool()
		if !upTLS.RootCAs.AppendCertsFromPEM(pem) {
			fail(2, "--upstream-ca: no PEM certificate in %s", *upstreamCA)
		}
	}
	transport := &http.Transport{
		Proxy:               nil, // never through $HTTPS_PROXY: the upstream is local
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     upTLS, // a custom TLS config also keeps this HTTP/1.1: one watch, one connection
		TLSHandshakeTimeout: 10 * time.Second,
		DisableCompression:  true, // pass Accept-Encoding and the answer through as they are
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fail(1, "--listen: %v", err)
	}
	scheme := "http"
	if *tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			fail(2, "--tls-cert/--tls-key: %v", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert},
			NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
		scheme = "https"
	}
	p := newProxy(up, transport, faults)
	p.verbose = *verbose
	srv := &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 30 * time.Second,
		// HTTP/1.1 only: a dropped watch is then a closed connection.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	if !*verbose {
		srv.ErrorLog = log.New(io.Discard, "", 0) // TLS handshake noise from probes
	}

	port := ln.Addr().(*net.TCPAddr).Port
	if *portFile != "" {
		if err := writeAtomic(*portFile, strconv.Itoa(port)+"\n"); err != nil {
			fail(1, "--port-file: %v", err)
		}
	}
	log.Printf("%s://%s -> %s (%d fault rules)", scheme, ln.Addr(), up, len(faults))

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-sig:
		// Open watches would hold a graceful shutdown: close everything now.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		srv.Shutdown(ctx)
		os.Exit(0)
	case err := <-errc:
		fail(1, "serve: %v", err)
	}
}
