package controlplane

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
)

// Request names a kind of API request as the API server's
// apiserver_request_total counts it.
type Request struct {
	// Verb is the metric's verb label (POST, PATCH, PUT, DELETE, GET,
	// LIST, WATCH, ...).
	Verb string
	// Resource and Subresource are the metric's labels ("pods",
	// "binding"; "pods", "status"; "pods", "").
	Resource, Subresource string
}

// String is "VERB resource/subresource".
func (r Request) String() string {
	if r.Subresource == "" {
		return r.Verb + " " + r.Resource
	}
	return r.Verb + " " + r.Resource + "/" + r.Subresource
}

// Write reports whether the request changes an object (POST, PUT, PATCH,
// DELETE, DELETECOLLECTION).
func (r Request) Write() bool {
	switch r.Verb {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION":
		return true
	}
	return false
}

// Metrics is what the API server's /metrics said at one moment.
type Metrics struct {
	// Requests are apiserver_request_total summed over the labels other
	// than verb, resource and subresource (response codes included).
	Requests map[Request]float64
	// CPUSeconds is the API server's process_cpu_seconds_total.
	CPUSeconds float64
}

// Sub returns the requests counted since before (m minus before) and the
// CPU seconds spent meanwhile; kinds that did not change are left out.
func (m Metrics) Sub(before Metrics) Metrics {
	out := Metrics{Requests: map[Request]float64{}, CPUSeconds: m.CPUSeconds - before.CPUSeconds}
	for r, n := range m.Requests {
		if d := n - before.Requests[r]; d != 0 {
			out.Requests[r] = d
		}
	}
	return out
}

// ScrapeMetrics reads the API server's /metrics with cfg (as [Start]
// returns it).
func ScrapeMetrics(ctx context.Context, cfg *rest.Config) (Metrics, error) {
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test server with a self-signed certificate
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/metrics", nil)
	if err != nil {
		return Metrics{}, err
	}
	req.Header.Set("Authorization", "Bearer "+cfg.BearerToken)
	resp, err := client.Do(req)
	if err != nil {
		return Metrics{}, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Metrics{}, fmt.Errorf("reading the API server's /metrics: %s", resp.Status)
	}
	m := Metrics{Requests: map[Request]float64{}}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{"):
			labels, value, err := parseSample(line[len("apiserver_request_total"):])
			if err != nil {
				return Metrics{}, fmt.Errorf("apiserver_request_total: %w in %q", err, line)
			}
			m.Requests[Request{Verb: labels["verb"], Resource: labels["resource"], Subresource: labels["subresource"]}] += value
		case strings.HasPrefix(line, "process_cpu_seconds_total "):
			v, err := strconv.ParseFloat(strings.TrimSpace(line[len("process_cpu_seconds_total "):]), 64)
			if err != nil {
				return Metrics{}, fmt.Errorf("process_cpu_seconds_total: %w", err)
			}
			m.CPUSeconds = v
		}
	}
	if err := sc.Err(); err != nil {
		return Metrics{}, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	return m, nil
}

// parseSample reads `{k="v",...} value` (label values without escaped
// quotes, as apiserver_request_total's are).
func parseSample(s string) (map[string]string, float64, error) {
	end := strings.IndexByte(s, '}')
	if !strings.HasPrefix(s, "{") || end < 0 {
		return nil, 0, fmt.Errorf("no label set")
	}
	labels := map[string]string{}
	for _, kv := range strings.Split(s[1:end], ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, 0, fmt.Errorf("label %q without a value", kv)
		}
		labels[k] = strings.Trim(v, `"`)
	}
	value, err := strconv.ParseFloat(strings.TrimSpace(s[end+1:]), 64)
	if err != nil {
		return nil, 0, fmt.Errorf("value: %w", err)
	}
	return labels, value, nil
}
