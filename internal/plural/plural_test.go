package plural

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestS(t *testing.T) {
	require.Equal(t, "0 requests, 1 request, 2 requests", fmt.Sprintf("%d request%s, %d request%s, %d request%s", 0, S(0), 1, S(1), 2, S(2)))
}
