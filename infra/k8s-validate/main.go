// Command k8s-validate decodes Kubernetes manifests strictly with the real API types, as an API server would
// before admission: every document of a multi-document YAML stream must be a kind this build knows (the
// built-in API groups of k8s.io/api, plus the Prometheus operator's monitoring.coreos.com/v1), and decoding
// fails on an unknown or duplicated field, a wrong type or a malformed quantity. On top of decoding it runs
// the object-metadata validation of k8s.io/apimachinery (names, labels, annotations) and a few checks an API
// server makes on pod templates (container, port and env var names, volume mounts, named probe ports, a
// Deployment's selector matching its template).
//
// Usage: k8s-validate [FILE...]   (no file: standard input). Prints one line per object ("ok Kind/name"),
// each problem on standard error, and exits 1 when any document fails, 2 on a usage or read error.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

func main() {
	inputs := os.Args[1:]
	failed := false
	if len(inputs) == 0 {
		failed = validateStream("<stdin>", os.Stdin)
	}
	for _, path := range inputs {
		file, err := os.Open(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "k8s-validate: %v\n", err)
			os.Exit(2)
		}
		failed = validateStream(path, file) || failed
		file.Close()
	}
	if failed {
		os.Exit(1)
	}
}

func newDecoder() runtime.Decoder {
	types := runtime.NewScheme()
	must(scheme.AddToScheme(types))
	must(monitoringv1.AddToScheme(types))
	return json.NewSerializerWithOptions(json.DefaultMetaFactory, types, types,
		json.SerializerOptions{Yaml: true, Strict: true})
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// validateStream reports every problem of every document in r; true when any was found.
func validateStream(source string, r io.Reader) bool {
	decoder := newDecoder()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	failed := false
	for index := 0; ; index++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return failed
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: document %d: %v\n", source, index, err)
			return true
		}
		if isEmpty(doc) {
			continue
		}
		name, problems := validateDocument(decoder, doc)
		for _, problem := range problems {
			fmt.Fprintf(os.Stderr, "%s: document %d (%s): %s\n", source, index, name, problem)
		}
		if len(problems) > 0 {
			failed = true
		} else {
			fmt.Printf("ok %s\n", name)
		}
	}
}

// isEmpty: only comments and blank lines (helm template separates templates that render nothing this way).
func isEmpty(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' && !bytes.Equal(line, []byte("---")) {
			return false
		}
	}
	return true
}

func validateDocument(decoder runtime.Decoder, doc []byte) (string, []string) {
	obj, gvk, err := decoder.Decode(doc, nil, nil)
	if err != nil {
		// Name the document even when it did not decode: read kind and name loosely.
		var loose struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if yaml.Unmarshal(doc, &loose) == nil && loose.Kind != "" {
			return loose.Kind + "/" + loose.Metadata.Name, []string{err.Error()}
		}
		return describe(obj, gvk), []string{err.Error()}
	}
	name := describe(obj, gvk)
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return name, []string{err.Error()}
	}
	objectMeta := metav1.ObjectMeta{
		Name: accessor.GetName(), GenerateName: accessor.GetGenerateName(), Namespace: accessor.GetNamespace(),
		Labels: accessor.GetLabels(), Annotations: accessor.GetAnnotations(),
	}
	nameFn := apivalidation.NameIsDNSSubdomain
	if gvk.Kind == "Service" {
		nameFn = apivalidation.NameIsDNS1035Label
	}
	errs := apivalidation.ValidateObjectMeta(&objectMeta, objectMeta.Namespace != "", nameFn, field.NewPath("metadata"))
	errs = append(errs, validateWorkload(obj)...)
	problems := make([]string, 0, len(errs))
	for _, e := range errs {
		problems = append(problems, e.Error())
	}
	return name, problems
}

func describe(obj runtime.Object, gvk *schema.GroupVersionKind) string {
	kind := "unknown kind"
	if gvk != nil && gvk.Kind != "" {
		kind = gvk.Kind
	}
	if obj != nil {
		if accessor, err := meta.Accessor(obj); err == nil && accessor.GetName() != "" {
			return kind + "/" + accessor.GetName()
		}
	}
	return kind
}
