package convert

func certificateSigningRequest(obj map[string]any) error {
	spec := path(obj, false, "spec")
	if spec == nil {
		return refused("spec is missing")
	}
	signer, _ := spec["signerName"].(string)
	switch signer {
	case "":
		return refused("spec.signerName is missing: v1beta1 picked one from the request's contents, v1 requires it; name the signer")
	case "kubernetes.io/legacy-unknown":
		return refused("certificates.k8s.io/v1 refuses to create requests for kubernetes.io/legacy-unknown; name another signer")
	}
	// v1beta1 defaulted nil usages: a missing or null key, and an empty
	// list from any client that sent it by protobuf or by Go's JSON, whose
	// omitempty drops it. v1 requires at least one usage.
	if empty(spec["usages"]) {
		spec["usages"] = []any{"digital signature", "key encipherment"}
	}
	return nil
}

func podCertificateRequest(obj map[string]any) error {
	spec := path(obj, false, "spec")
	for _, f := range []string{"pkixPublicKey", "proofOfPossession"} {
		if _, set := spec[f]; set {
			return refused("spec.%s is set, and certificates.k8s.io/v1 has no such field; send the key in spec.stubPKCS10Request", f)
		}
	}
	return nil
}
