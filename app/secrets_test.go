package app_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/testutil/lockedbuf"
)

// secret is the password of the tests: no log line may hold it.
const secret = "s3cr3t-hunter2"

// secretWarning is the one line WarnSecretsInFile logs for
// kafka.sasl.password.
const secretWarning = `{"level":"warn","key":"kafka.sasl.password","env":"SUNSET_KAFKA_SASL_PASSWORD",` +
	`"message":"kafka.sasl.password is set in the config file, where whoever can read the file (or the ConfigMap it comes from) can read it: ` +
	`remove it from the file and set the environment variable SUNSET_KAFKA_SASL_PASSWORD instead (in Kubernetes, from a Secret with valueFrom.secretKeyRef)"}` + "\n"

// writeConfig writes a config file that holds body and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sunset.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

const saslInFile = "kafka:\n  sasl:\n    mechanism: scram-sha-512\n    username: sunset\n    password: " + secret + "\n"

// A SASL password written in the config file is warned about: the line
// names the key and the environment variable to use, and never the
// password. The environment alone draws no warning; the file with the
// environment still does, since the file still holds the password.
func TestSecretInConfigFileIsWarnedAbout(t *testing.T) {
	cfg, err := config.Load(config.Flags(), writeConfig(t, saslInFile))
	require.NoError(t, err)
	require.Equal(t, secret, cfg.Kafka.SASL.Password)
	var logs bytes.Buffer
	cfg.WarnSecretsInFile(zerolog.New(&logs))
	require.JSONEq(t, secretWarning, logs.String())
	require.NotContains(t, logs.String(), secret)

	t.Setenv("SUNSET_KAFKA_SASL_PASSWORD", "from-env-"+secret)
	for name, body := range map[string]string{
		"env only":      "kafka:\n  sasl:\n    mechanism: scram-sha-512\n    username: sunset\n",
		"empty in file": "kafka:\n  sasl:\n    mechanism: scram-sha-512\n    username: sunset\n    password: \"\"\n",
		"no file":       "",
	} {
		path := ""
		if body != "" {
			path = writeConfig(t, body)
		}
		cfg, err := config.Load(config.Flags(), path)
		require.NoError(t, err, name)
		require.Equal(t, "from-env-"+secret, cfg.Kafka.SASL.Password, name)
		logs.Reset()
		cfg.WarnSecretsInFile(zerolog.New(&logs))
		require.Empty(t, logs.String(), name)
	}

	cfg, err = config.Load(config.Flags(), writeConfig(t, saslInFile))
	require.NoError(t, err)
	logs.Reset()
	cfg.WarnSecretsInFile(zerolog.New(&logs))
	require.JSONEq(t, secretWarning, logs.String(), "the environment wins, but the file still holds a password")
}

// serve logs the warning as it starts, through the logger it is given.
func TestServeWarnsOfSecretInConfigFile(t *testing.T) {
	cfg, err := config.Load(config.Flags(), writeConfig(t, "data-dir: "+t.TempDir()+"\nlisten: 127.0.0.1:0\nshutdown-timeout: 5s\n"+saslInFile))
	require.NoError(t, err)
	var logs lockedbuf.Buffer
	startLogging(t, cfg, zerolog.New(&logs))
	out := logs.String()
	require.Equal(t, 1, strings.Count(out, strings.TrimSuffix(secretWarning, "}\n")), out)
	require.NotContains(t, out, secret)
}
