package main

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateWorkload: the pod-template checks an API server makes that strict decoding cannot (a subset of
// k8s.io/kubernetes/pkg/apis/core/validation, which is not importable as a module).
func validateWorkload(obj runtime.Object) field.ErrorList {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		path := field.NewPath("spec")
		errs := validateSelector(o.Spec.Selector, o.Spec.Template.Labels, path)
		return append(errs, validatePodSpec(&o.Spec.Template.Spec, path.Child("template", "spec"))...)
	case *batchv1.Job:
		return validatePodSpec(&o.Spec.Template.Spec, field.NewPath("spec", "template", "spec"))
	case *corev1.Pod:
		return validatePodSpec(&o.Spec, field.NewPath("spec"))
	}
	return nil
}

func validateSelector(selector *metav1.LabelSelector, templateLabels map[string]string, path *field.Path) field.ErrorList {
	if selector == nil || (len(selector.MatchLabels) == 0 && len(selector.MatchExpressions) == 0) {
		return field.ErrorList{field.Required(path.Child("selector"), "a Deployment needs a non-empty selector")}
	}
	parsed, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return field.ErrorList{field.Invalid(path.Child("selector"), selector, err.Error())}
	}
	if !parsed.Matches(labelSet(templateLabels)) {
		return field.ErrorList{field.Invalid(path.Child("template", "metadata", "labels"), templateLabels,
			"`selector` does not match template `labels`")}
	}
	return nil
}

type labelSet map[string]string

func (l labelSet) Has(key string) bool   { _, ok := l[key]; return ok }
func (l labelSet) Get(key string) string { return l[key] }
func (l labelSet) Lookup(key string) (string, bool) {
	value, ok := l[key]
	return value, ok
}

func validatePodSpec(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes := map[string]bool{}
	for i, volume := range spec.Volumes {
		volumePath := path.Child("volumes").Index(i)
		for _, msg := range validation.IsDNS1123Label(volume.Name) {
			errs = append(errs, field.Invalid(volumePath.Child("name"), volume.Name, msg))
		}
		if volumes[volume.Name] {
			errs = append(errs, field.Duplicate(volumePath.Child("name"), volume.Name))
		}
		volumes[volume.Name] = true
	}
	names := map[string]bool{}
	containers := func(list []corev1.Container, child string) {
		for i := range list {
			containerPath := path.Child(child).Index(i)
			if names[list[i].Name] {
				errs = append(errs, field.Duplicate(containerPath.Child("name"), list[i].Name))
			}
			names[list[i].Name] = true
			errs = append(errs, validateContainer(&list[i], volumes, containerPath)...)
		}
	}
	containers(spec.InitContainers, "initContainers")
	containers(spec.Containers, "containers")
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"), "a pod needs a container"))
	}
	return errs
}

func validateContainer(c *corev1.Container, volumes map[string]bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(c.Name) {
		errs = append(errs, field.Invalid(path.Child("name"), c.Name, msg))
	}
	if c.Image == "" {
		errs = append(errs, field.Required(path.Child("image"), ""))
	}
	ports := map[string]bool{}
	for i, port := range c.Ports {
		portPath := path.Child("ports").Index(i)
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(portPath.Child("name"), port.Name, msg))
			}
			ports[port.Name] = true
		}
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(portPath.Child("containerPort"), port.ContainerPort, msg))
		}
	}
	for i, env := range c.Env {
		for _, msg := range validation.IsEnvVarName(env.Name) {
			errs = append(errs, field.Invalid(path.Child("env").Index(i).Child("name"), env.Name, msg))
		}
	}
	for i, mount := range c.VolumeMounts {
		if !volumes[mount.Name] {
			errs = append(errs, field.NotFound(path.Child("volumeMounts").Index(i).Child("name"), mount.Name))
		}
	}
	probes := map[string]*corev1.Probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe,
		"startupProbe": c.StartupProbe}
	for name, probe := range probes {
		if probe != nil {
			errs = append(errs, validateProbePort(probe.ProbeHandler, ports, path.Child(name))...)
		}
	}
	return errs
}

func validateProbePort(handler corev1.ProbeHandler, ports map[string]bool, path *field.Path) field.ErrorList {
	var port *intstr.IntOrString
	switch {
	case handler.HTTPGet != nil:
		port = &handler.HTTPGet.Port
	case handler.TCPSocket != nil:
		port = &handler.TCPSocket.Port
	default:
		return nil
	}
	if port.Type == intstr.String && !ports[port.StrVal] {
		return field.ErrorList{field.NotFound(path.Child("port"), fmt.Sprintf("%s (no such named container port)", port.StrVal))}
	}
	return nil
}
