package httpapi

import (
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// routeMethods knows, for every path of the OpenAPI document, the methods it is served with,
// so that a request to a known path with another method is told which ones (405 and Allow)
// rather than that the path does not exist.
type routeMethods struct {
	routes []routeTemplate
}

// routeTemplate is one document path, split at its slashes; a segment in braces matches any
// one segment.
type routeTemplate struct {
	segments []string
	methods  []string
}

func newRouteMethods(doc *openapi3.T) routeMethods {
	var rm routeMethods
	for path, item := range doc.Paths.Map() {
		var methods []string
		for method := range item.Operations() {
			methods = append(methods, strings.ToUpper(method))
		}
		sort.Strings(methods)
		rm.routes = append(rm.routes, routeTemplate{segments: strings.Split(path, "/"), methods: methods})
	}
	return rm
}

// allowed returns the methods path is served with; nil when the document has no such path.
func (rm routeMethods) allowed(path string) []string {
	segments := strings.Split(path, "/")
	for _, r := range rm.routes {
		if len(r.segments) != len(segments) {
			continue
		}
		match := true
		for i, s := range r.segments {
			if s != segments[i] && !(strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") && segments[i] != "") {
				match = false
				break
			}
		}
		if match {
			return slices.Clone(r.methods)
		}
	}
	return nil
}
