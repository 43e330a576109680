package v1

// Labels on every object, so `kubectl get -l` selects by them:
//
//	kubectl get apirequestcounts.sunset.dev -l sunset.dev/removed-in-release=1.37
//	kubectl get apirequestcounts.sunset.dev -l sunset.dev/state=removed
const (
	// LabelRemovedInRelease is status.removedInRelease; absent for APIs
	// with no removal planned (endpoints.v1).
	LabelRemovedInRelease = Group + "/removed-in-release"
	// LabelState is StateRemoved when clients called the API after its
	// removal in the last 24 hours (status.removed), else StateDeprecated.
	LabelState = Group + "/state"
)
