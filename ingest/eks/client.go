package eks

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
	"github.com/rs/zerolog"
)

// maxAttempts is how often the SDK tries one call before the poll fails
// and Run's own backoff takes over: throttling is the usual cause, and the
// adaptive mode slows down between attempts.
const maxAttempts = 5

// awsConfig is the configuration the client starts from: the one given
// (tests), else the SDK's default chain, which finds IRSA's web identity
// token, EKS Pod Identity's agent, the AWS_* environment and instance
// roles. Credentials are fetched at the first call, not here. The SDK
// and its credential providers log through logger, not to stderr in a
// format of their own, the default chain's.
func awsConfig(c Config, given *aws.Config, logger logging.Logger) (aws.Config, error) {
	var cfg aws.Config
	if given != nil {
		cfg = given.Copy()
		cfg.Logger = logger
	} else {
		opts := []func(*config.LoadOptions) error{config.WithLogger(logger)}
		if c.Region != "" {
			opts = append(opts, config.WithRegion(c.Region))
		}
		var err error
		if cfg, err = config.LoadDefaultConfig(context.Background(), opts...); err != nil {
			return cfg, fmt.Errorf("eks %s: loading the AWS configuration: %w", c.Cluster, err)
		}
	}
	if c.Region != "" {
		cfg.Region = c.Region
	}
	if cfg.Region == "" {
		return cfg, fmt.Errorf("eks %s: no AWS Region: set eks.region to the cluster's, or AWS_REGION in the environment", c.Cluster)
	}
	return cfg, nil
}

// newClient builds the CloudWatch Logs client: the SDK's adaptive retry
// mode, which backs off and also paces attempts once throttled (the quota
// is the account's, shared with every other caller), and a middleware
// that counts every attempt. retryDelay, when set (tests), replaces the
// SDK's jittered backoff between attempts.
func newClient(c Config, cfg aws.Config, m *metrics, log zerolog.Logger, retryDelay time.Duration) *cloudwatchlogs.Client {
	return cloudwatchlogs.NewFromConfig(cfg, func(o *cloudwatchlogs.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
		o.Retryer = retry.NewAdaptiveMode(func(a *retry.AdaptiveModeOptions) {
			a.StandardOptions = append(a.StandardOptions, func(s *retry.StandardOptions) {
				s.MaxAttempts = maxAttempts
				if retryDelay > 0 {
					s.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return retryDelay, nil })
				}
			})
		})
		o.APIOptions = append(o.APIOptions, countAttempts(m, log))
	})
}

// countAttempts adds a middleware inside the SDK's retry loop, so that it
// sees each attempt: throttled ones that a retry then got through
// included. Throttling is expected on a busy account and is logged at
// debug only.
func countAttempts(m *metrics, log zerolog.Logger) func(*middleware.Stack) error {
	count := middleware.FinalizeMiddlewareFunc("SunsetEKSAttempts", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
		middleware.FinalizeOutput, middleware.Metadata, error,
	) {
		out, md, err := next.HandleFinalize(ctx, in)
		op := operation(ctx)
		switch {
		case err == nil:
			m.requests.WithLabelValues(op, requestOK).Inc()
		case throttled(err):
			m.requests.WithLabelValues(op, requestThrottled).Inc()
			log.Debug().Err(err).Str("operation", op).Msg("call throttled; the SDK slows down and retries")
		case ctx.Err() == nil:
			m.requests.WithLabelValues(op, requestError).Inc()
		}
		return out, md, err
	})
	return func(s *middleware.Stack) error { return s.Finalize.Insert(count, "Retry", middleware.After) }
}

func throttled(err error) bool {
	return retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary
}

// groupARN finds the log group's ARN in an access-denied message, which
// names it ("... on resource: arn:aws:logs:<region>:<account>:log-group:
// <group>:log-stream: ..."); group names hold no colon.
var groupARN = regexp.MustCompile(`arn:aws[a-z-]*:logs:[a-z0-9-]+:[0-9]{12}:log-group:[^\s:]+`)

// explain says what a failed poll means and what to do about it, for the
// log and for Ready.
func (s *Source) explain(err error) string {
	var opErr *smithy.OperationError
	if !errors.As(err, &opErr) {
		// Not a call to AWS (a commit, the checkpoint): the error says
		// what it is.
		return err.Error()
	}
	what := fmt.Sprintf("eks %s: %s on %s", s.cfg.Cluster, opErr.OperationName, s.cfg.LogGroup)
	var api smithy.APIError
	switch {
	case throttled(err):
		return what + ": throttled: the account's quota (FilterLogEvents' 5 calls a second per Region, shared with every other caller) is used up; raise eks.pollInterval, or ask AWS for a higher quota"
	case errors.As(err, &api):
		switch code := api.ErrorCode(); code {
		case "AccessDeniedException":
			arn := groupARN.FindString(api.ErrorMessage())
			if arn == "" {
				arn = fmt.Sprintf("arn:aws:logs:%s:<account>:log-group:%s", s.region, s.cfg.LogGroup)
			}
			return what + ": access denied; grant logs:DescribeLogStreams and logs:FilterLogEvents on " + arn + ":* to the role Sunset runs as (IRSA or EKS Pod Identity)"
		case "ResourceNotFoundException":
			return fmt.Sprintf("%s: the log group does not exist in %s; turn on the audit log type of the EKS cluster's control-plane logging, or set eks.logGroup and eks.region to where it is", what, s.region)
		case "UnrecognizedClientException", "InvalidSignatureException", "IncompleteSignature", "ExpiredTokenException", "InvalidClientTokenId":
			return fmt.Sprintf("%s: AWS refused the credentials (%s); check the role IRSA or EKS Pod Identity gives Sunset's pod, or the AWS_* environment", what, code)
		default:
			return fmt.Sprintf("%s: %s: %s", what, code, api.ErrorMessage())
		}
	case strings.Contains(err.Error(), "get identity"):
		return what + ": no usable AWS credentials (" + err.Error() + "); give Sunset's pod a role with IRSA or EKS Pod Identity, or set the AWS_* environment"
	default:
		return what + ": " + err.Error()
	}
}
