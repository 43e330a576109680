package config

import (
	"github.com/rs/zerolog"
	"github.com/spf13/viper"
)

// secretKeys are the keys whose value is itself a secret, rather than the
// path of a file that holds one (webhook-token-file, tls-key-file,
// token-auth-file, kafka.tls.keyFile) or a credential the SDKs find on
// their own (EKS and GKE). A config file is often a ConfigMap, checked in
// or readable by anyone who may read the namespace, so a secret there is
// warned about at start (WarnSecretsInFile). TestSecretKeysAreListed keeps
// the list complete.
var secretKeys = []string{"kafka.fleet.keys", "kafka.sasl.password"}

// secretsInFile returns the secret keys the config file itself sets to
// something other than "", in the order of secretKeys. v merges the
// environment over the file, so the file's own values are read apart.
func secretsInFile(v *viper.Viper, configFile string) []string {
	var file *viper.Viper
	var out []string
	for _, k := range secretKeys {
		if !v.InConfig(k) {
			continue
		}
		if file == nil {
			file = viper.New()
			file.SetConfigFile(configFile)
			if err := file.ReadInConfig(); err != nil {
				return nil // read once already: Load reports it
			}
		}
		if file.GetString(k) != "" {
			out = append(out, k)
		}
	}
	return out
}

// WarnSecretsInFile logs a warning, once at start, for each secret the
// config file holds, naming the key and the environment variable to set
// instead. It never logs the value.
func (c Config) WarnSecretsInFile(log zerolog.Logger) {
	for _, k := range c.secretsInFile {
		log.Warn().Str("key", k).Str("env", envName(k)).
			Msgf("%s is set in the config file, where whoever can read the file (or the ConfigMap it comes from) can read it: "+
				"remove it from the file and set the environment variable %s instead (in Kubernetes, from a Secret with valueFrom.secretKeyRef)",
				k, envName(k))
	}
}
