package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// start runs a proxy in front of upstream with the given fault spec.
func start(t *testing.T, upstream http.Handler, spec string) (*proxy, string) {
	t.Helper()
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	faults, err := parseFaults(spec)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	p := newProxy(u, &http.Transport{Proxy: nil}, faults)
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	return p, front.URL
}

// okUpstream answers every request 200 {"ok":true}.
var okUpstream = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"ok":true}`)
})

func do(t *testing.T, method, u, ua, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ua != "" {
		req.Header.Set("User-Agent", ua)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, u, err)
	}
	return resp, string(b)
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	_, body := do(t, "GET", u, "", "")
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%s: %v: %s", u, err, body)
	}
}

const dvb = "/apis/podres.dev/v1alpha1/namespaces/ml/devicebindings"

func TestParseFaults(t *testing.T) {
	good := map[string]int{
		"":                        0,
		"500":                     1,
		"429:count=3:verbs=write": 1,
		"503:retry-after=1:resource=devicebindings; 409:count=2": 2,
		"watch-drop:after=2:count=1, stall:seconds=5:verbs=list": 2,
		"429:body=status:retry-after=none":                       1,
		"too-large:verbs=watch:user-agent=podres-syncer|kubectl": 1,
		"watch-stall:seconds=0.5,410":                            2,
	}
	for spec, n := range good {
		fs, err := parseFaults(spec)
		if err != nil || len(fs) != n {
			t.Errorf("parseFaults(%q) = %d rules, %v; want %d", spec, len(fs), err, n)
		}
	}
	bad := []string{"418", "500:count", "500:count=x", "500:count=-1", "500:verbs=fetch",
		"429:body=html", "stall:seconds=-1", "500:bogus=1", "500:resource=", "watch-drop:after=x"}
	for _, spec := range bad {
		if _, err := parseFaults(spec); err == nil {
			t.Errorf("parseFaults(%q) accepted a bad spec", spec)
		}
	}

	fs, _ := parseFaults("409")
	f := fs[0]
	if *f.Remaining != 1 || strings.Join(f.Verbs, "|") != "patch|update" {
		t.Errorf("409 defaults: remaining %v verbs %v", *f.Remaining, f.Verbs)
	}
	fs, _ = parseFaults("429:verbs=write:resource=devicebindings|pods")
	f = fs[0]
	if *f.RetryAfter != 1 || f.Body != "text" || f.Remaining != nil ||
		strings.Join(f.Verbs, "|") != "create|delete|deletecollection|patch|update" ||
		strings.Join(f.Resources, "|") != "devicebindings|pods" {
		t.Errorf("429 rule: %+v", f)
	}
	fs, _ = parseFaults("watch-drop:verbs=list")
	if strings.Join(fs[0].Verbs, "|") != "watch" {
		t.Errorf("watch-drop verbs %v, want watch", fs[0].Verbs)
	}
	fs, _ = parseFaults("stall")
	if *fs[0].Seconds != 3600 {
		t.Errorf("stall default seconds %v", *fs[0].Seconds)
	}
}

func TestClassify(t *testing.T) {
	cases := []struct{ method, path, verb, resource, name string }{
		{"GET", "/apis/podres.dev/v1alpha1/devicebindings", "list", "devicebindings", ""},
		{"GET", dvb, "list", "devicebindings", ""},
		{"GET", dvb + "?watch=true", "watch", "devicebindings", ""},
		{"GET", dvb + "?watch=1&resourceVersion=5", "watch", "devicebindings", ""},
		{"GET", dvb + "?watch=false", "list", "devicebindings", ""},
		{"GET", dvb + "?watch=0", "list", "devicebindings", ""},
		{"GET", dvb + "?watch=true&fieldSelector=metadata.name%3Dtrain-0", "watch", "devicebindings", "train-0"},
		{"GET", dvb + "/train-0", "get", "devicebindings", "train-0"},
		{"POST", dvb, "create", "devicebindings", ""},
		{"PUT", dvb + "/train-0", "update", "devicebindings", "train-0"},
		{"PUT", dvb + "/train-0/status", "update", "devicebindings/status", "train-0"},
		{"PATCH", dvb + "/train-0/status", "patch", "devicebindings/status", "train-0"},
		{"DELETE", dvb + "/train-0", "delete", "devicebindings", "train-0"},
		{"DELETE", dvb, "deletecollection", "devicebindings", ""},
		{"GET", "/apis/podres.dev/v1alpha1/watch/namespaces/ml/devicebindings", "watch", "devicebindings", ""},
		{"GET", "/api/v1/pods", "list", "pods", ""},
		{"GET", "/api/v1/namespaces/ml/pods/p", "get", "pods", "p"},
		{"GET", "/api/v1/namespaces/ml", "get", "namespaces", "ml"},
		{"PUT", "/api/v1/namespaces/ml/finalize", "update", "namespaces/finalize", "ml"},
		{"GET", "/api/v1/namespaces", "list", "namespaces", ""},
		{"GET", "/apis", "get", "/apis", ""},
		{"GET", "/api/v1", "get", "/api/v1", ""},
		{"GET", "/apis/podres.dev/v1alpha1", "get", "/apis/podres.dev/v1alpha1", ""},
		{"GET", "/version", "get", "/version", ""},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "create", "selfsubjectaccessreviews", ""},
	}
	for _, c := range cases {
		u, _ := url.Parse(c.path)
		got := classify(c.method, u.Path, u.Query())
		if got.verb != c.verb || got.resource != c.resource || got.name != c.name {
			t.Errorf("%s %s: verb %q resource %q name %q; want %q %q %q",
				c.method, c.path, got.verb, got.resource, got.name, c.verb, c.resource, c.name)
		}
	}
}

func TestForwardsRequestAsIs(t *testing.T) {
	var seen atomic.Value
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen.Store(r.Method + " " + r.URL.RequestURI() + " " + r.Header.Get("Authorization") + " " +
			r.Header.Get("Content-Type") + " " + string(b))
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"kind":"DeviceBinding"}`)
	})
	_, front := start(t, up, "")
	req, _ := http.NewRequest("PATCH", front+dvb+"/a%2Fb/status?fieldManager=x&dryRun=All", strings.NewReader(`{"x":1}`))
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Content-Type", "application/merge-patch+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := "PATCH " + dvb + "/a%2Fb/status?fieldManager=x&dryRun=All Bearer tok application/merge-patch+json {\"x\":1}"
	if got := seen.Load(); got != want {
		t.Errorf("upstream saw %q\nwant %q", got, want)
	}
	if resp.StatusCode != 201 || resp.Header.Get("X-Upstream") != "yes" || string(b) != `{"kind":"DeviceBinding"}` {
		t.Errorf("answer %d %v %s", resp.StatusCode, resp.Header, b)
	}
}

func TestCountDecrements(t *testing.T) {
	p, front := start(t, okUpstream, "500:count=2:verbs=list")
	codes := []int{}
	for i := 0; i < 3; i++ {
		resp, _ := do(t, "GET", front+dvb, "", "")
		codes = append(codes, resp.StatusCode)
	}
	if codes[0] != 500 || codes[1] != 500 || codes[2] != 200 {
		t.Errorf("codes %v, want 500 500 200", codes)
	}
	resp, _ := do(t, "GET", front+dvb+"/x", "", "") // a get: not matched
	if resp.StatusCode != 200 {
		t.Errorf("get: %d", resp.StatusCode)
	}
	var fs struct{ Faults []map[string]any }
	getJSON(t, front+"/_proxy/faults", &fs)
	if len(fs.Faults) != 0 {
		t.Errorf("used-up rule still listed: %v", fs.Faults)
	}
	_ = p

	// 409: once, on update and patch only, with the apiserver's message.
	_, front = start(t, okUpstream, "409")
	resp, _ = do(t, "GET", front+dvb+"/train-0", "", "")
	if resp.StatusCode != 200 {
		t.Errorf("409 rule hit a get")
	}
	resp, body := do(t, "PUT", front+dvb+"/train-0/status", "", "{}")
	var st status
	json.Unmarshal([]byte(body), &st)
	wantMsg := `Operation cannot be fulfilled on devicebindings.podres.dev "train-0": the object has been modified; please apply your changes to the latest version and try again`
	if resp.StatusCode != 409 || st.Reason != "Conflict" || st.Message != wantMsg ||
		st.Details == nil || st.Details.Name != "train-0" || st.Details.Group != "podres.dev" || st.Details.Kind != "devicebindings" {
		t.Errorf("409: %d %s", resp.StatusCode, body)
	}
	resp, _ = do(t, "PUT", front+dvb+"/train-0/status", "", "{}")
	if resp.StatusCode != 200 {
		t.Errorf("second update: %d, want 200 (409 defaults to count=1)", resp.StatusCode)
	}
}

func Test429TextAndStatus(t *testing.T) {
	_, front := start(t, okUpstream, "429:count=1, 429:body=status:retry-after=3:count=1, 503:count=1, 503:retry-after=2:count=1")
	resp, body := do(t, "GET", front+dvb, "", "")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" ||
		body != "Too many requests, please try again later.\n" ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") ||
		resp.Header.Get("Cache-Control") != "no-cache, private" {
		t.Errorf("429 text: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	resp, body = do(t, "GET", front+dvb, "", "")
	var st status
	json.Unmarshal([]byte(body), &st)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" || st.Kind != "Status" ||
		st.Reason != "TooManyRequests" || st.Code != 429 || st.Details == nil || st.Details.RetryAfterSeconds != 3 {
		t.Errorf("429 status: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, body = do(t, "GET", front+dvb, "", "")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "" || !strings.Contains(body, `"reason":"ServiceUnavailable"`) {
		t.Errorf("503: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, body = do(t, "GET", front+dvb, "", "")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "2" || !strings.Contains(body, `"retryAfterSeconds":2`) {
		t.Errorf("503 retry-after=2: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, _ = do(t, "GET", front+dvb, "", "")
	if resp.StatusCode != 200 {
		t.Errorf("after the rules: %d", resp.StatusCode)
	}
}

func TestExpiredAndTooLarge(t *testing.T) {
	_, front := start(t, okUpstream, "410:count=2, too-large:count=2")
	resp, body := do(t, "GET", front+dvb+"?watch=true&resourceVersion=7", "", "")
	want := `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}` + "\n"
	if resp.StatusCode != 200 || body != want {
		t.Errorf("410 on watch: %d %q", resp.StatusCode, body)
	}
	resp, body = do(t, "GET", front+dvb, "", "")
	if resp.StatusCode != 410 || !strings.Contains(body, `"reason":"Expired"`) {
		t.Errorf("410 on list: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, "GET", front+dvb+"?watch=1&resourceVersion=900", "", "")
	want = `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: Too large resource version: 900, current: 899","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}}` + "\n"
	if resp.StatusCode != 200 || body != want {
		t.Errorf("too-large on watch: %d %q", resp.StatusCode, body)
	}
	resp, body = do(t, "GET", front+dvb+"?resourceVersion=900&resourceVersionMatch=NotOlderThan", "", "")
	if resp.StatusCode != 504 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, "ResourceVersionTooLarge") {
		t.Errorf("too-large on list: %d %s", resp.StatusCode, body)
	}
}

// watchUpstream sends one event at once, then one whenever next gets a value,
// until stop is closed.
func watchUpstream(next <-chan string, stop <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		io.WriteString(w, `{"type":"ADDED","object":{"n":0}}`+"\n")
		w.(http.Flusher).Flush()
		for {
			select {
			case s := <-next:
				io.WriteString(w, s+"\n")
				w.(http.Flusher).Flush()
			case <-stop:
				return
			case <-r.Context().Done():
				return
			}
		}
	})
}

func TestStreamingFlush(t *testing.T) {
	next, stop := make(chan string), make(chan struct{})
	_, front := start(t, watchUpstream(next, stop), "")
	resp, err := http.Get(front + dvb + "?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewReader(resp.Body)
	readLine := func() string {
		t.Helper()
		done := make(chan string, 1)
		go func() { s, _ := lines.ReadString('\n'); done <- s }()
		select {
		case s := <-done:
			return s
		case <-time.After(3 * time.Second):
			t.Fatal("an event written upstream did not reach the client while the stream is open")
			return ""
		}
	}
	if s := readLine(); !strings.Contains(s, `"n":0`) {
		t.Errorf("first event %q", s)
	}
	next <- `{"type":"MODIFIED","object":{"n":1}}`
	if s := readLine(); !strings.Contains(s, `"n":1`) {
		t.Errorf("second event %q", s)
	}
	close(stop)
	if rest, err := io.ReadAll(lines); err != nil || len(rest) != 0 {
		t.Errorf("clean end: %q %v", rest, err)
	}
}

func TestWatchDrop(t *testing.T) {
	next, stop := make(chan string), make(chan struct{})
	defer close(stop)
	p, front := start(t, watchUpstream(next, stop), "watch-drop:count=1")

	// after=0: the headers, then a broken connection.
	resp, err := http.Get(front + dvb + "?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("watch-drop: %d, read error %v; want 200 and unexpected EOF", resp.StatusCode, err)
	}

	// The rule is used up: the next watch streams, until the admin drop.
	resp, err = http.Get(front + dvb + "?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewReader(resp.Body)
	if s, _ := lines.ReadString('\n'); !strings.Contains(s, `"n":0`) {
		t.Errorf("first event %q", s)
	}
	var state struct{ Watches int }
	getJSON(t, front+"/_proxy/state", &state)
	if state.Watches != 1 {
		t.Errorf("state.watches = %d, want 1", state.Watches)
	}
	var dropped struct{ Dropped int }
	_, body := do(t, "POST", front+"/_proxy/watches/drop", "", "")
	json.Unmarshal([]byte(body), &dropped)
	if dropped.Dropped != 1 {
		t.Errorf("dropped %s", body)
	}
	if _, err := io.ReadAll(lines); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("admin drop: read error %v, want unexpected EOF", err)
	}
	time.Sleep(50 * time.Millisecond)
	getJSON(t, front+"/_proxy/state", &state)
	if state.Watches != 0 {
		t.Errorf("state.watches = %d after the drop", state.Watches)
	}
	_ = p

	// after=S: events flow, then the connection breaks.
	_, front = start(t, watchUpstream(nil, stop), "watch-drop:after=0.3")
	t0 := time.Now()
	resp2, err := http.Get(front + dvb + "?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if !strings.Contains(string(b), `"n":0`) || !errors.Is(err, io.ErrUnexpectedEOF) || time.Since(t0) < 250*time.Millisecond {
		t.Errorf("watch-drop:after: %q %v after %v", b, err, time.Since(t0))
	}
}

func TestWatchStall(t *testing.T) {
	next, stop := make(chan string), make(chan struct{})
	defer close(stop)
	_, front := start(t, watchUpstream(next, stop), "watch-stall:seconds=0.5")
	t0 := time.Now()
	resp, err := http.Get(front + dvb + "?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewReader(resp.Body)
	s, _ := lines.ReadString('\n')
	if !strings.Contains(s, `"n":0`) || time.Since(t0) < 400*time.Millisecond {
		t.Errorf("event %q after %v; want it withheld ~0.5 s", s, time.Since(t0))
	}
	next <- `{"type":"MODIFIED","object":{"n":1}}` // after the stall: straight through
	if s, _ := lines.ReadString('\n'); !strings.Contains(s, `"n":1`) {
		t.Errorf("after the stall %q", s)
	}
}

func TestStall(t *testing.T) {
	_, front := start(t, okUpstream, "stall:seconds=0.3:verbs=list:count=1, 500:count=1:verbs=list")
	t0 := time.Now()
	resp, _ := do(t, "GET", front+dvb, "", "")
	if resp.StatusCode != 500 || time.Since(t0) < 250*time.Millisecond {
		t.Errorf("stall then 500: %d after %v", resp.StatusCode, time.Since(t0))
	}

	// A client that gives up ends the stall; the request is logged with code 0.
	p, front := start(t, okUpstream, "stall:seconds=60")
	client := &http.Client{Timeout: 200 * time.Millisecond}
	if _, err := client.Get(front + dvb); err == nil {
		t.Fatal("stall did not stall")
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		p.mu.Lock()
		n := len(p.requests)
		p.mu.Unlock()
		if n == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var reqs struct{ Requests []requestRecord }
	getJSON(t, front+"/_proxy/requests", &reqs)
	if len(reqs.Requests) != 1 || reqs.Requests[0].Code != 0 {
		t.Errorf("requests %+v", reqs.Requests)
	}
	var c struct{ Total int }
	getJSON(t, front+"/_proxy/counters", &c)
	if c.Total != 0 {
		t.Errorf("aborted stall counted: %d", c.Total)
	}
}

func TestCountersAndFilters(t *testing.T) {
	_, front := start(t, okUpstream, "429:verbs=create:count=1")
	do(t, "GET", front+dvb, "podres-syncer/0.1", "")
	do(t, "GET", front+dvb, "kubectl/v1.36.3", "")
	do(t, "POST", front+dvb, "podres-syncer/0.1", "{}") // 429
	do(t, "POST", front+dvb, "podres-syncer/0.1", "{}")
	do(t, "PUT", front+dvb+"/a/status", "podres-syncer/0.1", "{}")
	do(t, "GET", front+"/apis", "kubectl/v1.36.3", "")
	do(t, "GET", front+"/_proxy/state", "", "") // never counted

	type counters struct {
		Total  int
		Counts map[string]map[string]map[string]int
	}
	var c counters
	getJSON(t, front+"/_proxy/counters", &c)
	if c.Total != 6 || c.Counts["list"]["devicebindings"]["200"] != 2 || c.Counts["create"]["devicebindings"]["429"] != 1 ||
		c.Counts["create"]["devicebindings"]["201"] != 0 || c.Counts["create"]["devicebindings"]["200"] != 1 ||
		c.Counts["update"]["devicebindings/status"]["200"] != 1 || c.Counts["get"]["/apis"]["200"] != 1 {
		t.Errorf("counters %+v", c)
	}
	check := func(q string, want int) {
		t.Helper()
		var c counters
		getJSON(t, front+"/_proxy/counters?"+q, &c)
		if c.Total != want {
			t.Errorf("counters?%s total %d, want %d (%v)", q, c.Total, want, c.Counts)
		}
	}
	check("verb=create,update,patch,delete&resource=devicebindings,devicebindings/status&code=2xx", 2)
	check("code=4xx", 1)
	check("code=429,200", 6)
	check("user-agent=podres-syncer", 4)
	check("user-agent=kubectl/,podres-syncer/&verb=list", 2)
	check("resource=/apis", 1)

	var reqs struct{ Requests []requestRecord }
	getJSON(t, front+"/_proxy/requests", &reqs)
	if len(reqs.Requests) != 6 || reqs.Requests[2].Code != 429 || reqs.Requests[2].Fault != "429" ||
		reqs.Requests[2].Verb != "create" || reqs.Requests[0].UserAgent != "podres-syncer/0.1" ||
		reqs.Requests[0].End < reqs.Requests[0].Start || reqs.Requests[0].Start < 1e9 {
		t.Errorf("requests %+v", reqs.Requests)
	}
	do(t, "DELETE", front+"/_proxy/counters", "", "")
	do(t, "DELETE", front+"/_proxy/requests", "", "")
	check("", 0)
	getJSON(t, front+"/_proxy/requests", &reqs)
	if len(reqs.Requests) != 0 {
		t.Errorf("requests not cleared")
	}
}

func TestUserAgentFilter(t *testing.T) {
	_, front := start(t, okUpstream, "503:user-agent=podres-syncer")
	if resp, _ := do(t, "GET", front+dvb, "kubectl/v1.36.3 (linux/amd64)", ""); resp.StatusCode != 200 {
		t.Errorf("kubectl faulted: %d", resp.StatusCode)
	}
	if resp, _ := do(t, "GET", front+dvb, "podres-syncer/0.1 (linux)", ""); resp.StatusCode != 503 {
		t.Errorf("syncer not faulted: %d", resp.StatusCode)
	}
}

func TestAdminFaults(t *testing.T) {
	_, front := start(t, okUpstream, "")
	type faults struct{ Faults []fault }
	var fs faults
	resp, body := do(t, "PUT", front+"/_proxy/faults", "", `{"spec":"500:count=2:verbs=list"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("PUT: %d %s", resp.StatusCode, body)
	}
	do(t, "POST", front+"/_proxy/faults", "", "503:resource=devicebindings; watch-drop")
	getJSON(t, front+"/_proxy/faults", &fs)
	if len(fs.Faults) != 3 || fs.Faults[0].Kind != "500" || *fs.Faults[0].Remaining != 2 ||
		fs.Faults[1].Resources[0] != "devicebindings" || fs.Faults[2].Verbs[0] != "watch" {
		t.Errorf("faults %+v", fs.Faults)
	}
	if resp, _ := do(t, "GET", front+dvb, "", ""); resp.StatusCode != 500 {
		t.Errorf("PUT rule not applied: %d", resp.StatusCode)
	}
	getJSON(t, front+"/_proxy/faults", &fs)
	if *fs.Faults[0].Remaining != 1 {
		t.Errorf("remaining %d", *fs.Faults[0].Remaining)
	}
	if resp, body := do(t, "PUT", front+"/_proxy/faults", "", "418"); resp.StatusCode != 400 || !strings.Contains(body, "unknown fault") {
		t.Errorf("bad spec: %d %s", resp.StatusCode, body)
	}
	if resp, _ := do(t, "PUT", front+"/_proxy/faults", "", `{"spec":5}`); resp.StatusCode != 400 {
		t.Errorf("bad body: %d", resp.StatusCode)
	}
	getJSON(t, front+"/_proxy/faults", &fs)
	if len(fs.Faults) != 3 {
		t.Errorf("a bad spec changed the rules: %+v", fs.Faults)
	}
	do(t, "DELETE", front+"/_proxy/faults", "", "")
	getJSON(t, front+"/_proxy/faults", &fs)
	var state map[string]any
	getJSON(t, front+"/_proxy/state", &state)
	if len(fs.Faults) != 0 || state["faults"] != 0.0 || !strings.HasPrefix(state["upstream"].(string), "http://127.0.0.1:") {
		t.Errorf("after DELETE: %+v %v", fs.Faults, state)
	}
	if resp, _ := do(t, "GET", front+"/_proxy/nope", "", ""); resp.StatusCode != 404 {
		t.Errorf("unknown admin path: %d", resp.StatusCode)
	}
}

func TestUpstreamDown(t *testing.T) {
	p, front := start(t, okUpstream, "")
	p.upstream, _ = url.Parse("http://127.0.0.1:1")
	resp, body := do(t, "GET", front+dvb, "", "")
	if resp.StatusCode != 502 || !strings.Contains(body, `"kind":"Status"`) {
		t.Errorf("upstream down: %d %s", resp.StatusCode, body)
	}
}
