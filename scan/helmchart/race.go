//go:build race

package helmchart

// raceDetector is set in a binary built with -race. ThreadSanitizer maps
// its shadow memory as the heap grows, so such a child's address space
// is not limited, and its resident memory is several times its heap.
const raceDetector = true
