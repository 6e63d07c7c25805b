package application

import "regexp"

// AWSStore is AWS Secrets Manager in one region. References name a secret
// by its name or ARN (the path) and, optionally, a key of the JSON object
// its SecretString holds.
//
// Where the controller talks (region, endpoint, CA bundle) comes from this
// declaration only: the controller's own AWS_REGION, AWS_ENDPOINT_URL*,
// AWS_CA_BUNDLE or AWS_PROFILE never redirect a store. Who it is (the
// credentials) is what Auth says.
type AWSStore struct {
	// Region is the secrets' region, such as eu-central-1. Required.
	Region string `yaml:"region"`
	// Endpoint replaces the regional endpoint, for a VPC interface
	// endpoint or an emulator. Default: the region's public endpoint. https;
	// http is accepted for a loopback address only.
	Endpoint string `yaml:"endpoint,omitempty"`
	// CACertFile is a PEM bundle the endpoint's certificate must chain to.
	// Default: the host's roots.
	CACertFile string `yaml:"caCertFile,omitempty"`
	// Auth is who the controller is to AWS. Exactly one of its ways.
	Auth AWSAuth `yaml:"auth"`
}

// AWSAuth is one way to have AWS credentials.
type AWSAuth struct {
	// DefaultChain takes the credentials the AWS SDK's default chain finds
	// on the controller's host: the AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY
	// environment, a web identity token (AWS_WEB_IDENTITY_TOKEN_FILE and
	// AWS_ROLE_ARN, as EKS IRSA sets them), the shared config and
	// credentials files, the ECS container role, or the EC2 instance role.
	// Only the credentials: the chain never picks the region or endpoint.
	DefaultChain bool `yaml:"defaultChain,omitempty"`
	// AccessKeyIDFile and SecretAccessKeyFile hold an access key; read
	// before every request, so a rotated key is picked up without a
	// restart, and the controller's environment is not consulted.
	AccessKeyIDFile     string `yaml:"accessKeyIDFile,omitempty"`
	SecretAccessKeyFile string `yaml:"secretAccessKeyFile,omitempty"`
	// SessionTokenFile holds the session token of temporary keys.
	// Optional, with the two files above only.
	SessionTokenFile string `yaml:"sessionTokenFile,omitempty"`
}

// awsRegionRE is the form of every AWS region name (us-east-1,
// us-gov-west-1, ap-southeast-5, ...).
var awsRegionRE = regexp.MustCompile(`^[a-z]{2,}(-[a-z]+)+-[0-9]+$`)

func (c *checker) awsStore(p string, a *AWSStore) {
	switch {
	case a.Region == "":
		c.report("", p+".region", ErrRequired, "required: the secrets' region, such as eu-central-1")
	case !awsRegionRE.MatchString(a.Region):
		c.report("", p+".region", ErrInvalid, "%q is not an AWS region name, such as eu-central-1", a.Region)
	}
	if a.Endpoint != "" {
		c.storeAddress(p+".endpoint", a.Endpoint)
	}
	c.absFile(p+".caCertFile", a.CACertFile, false)
	au := a.Auth
	keys := au.AccessKeyIDFile != "" || au.SecretAccessKeyFile != "" || au.SessionTokenFile != ""
	switch {
	case au.DefaultChain && keys:
		c.report("", p+".auth", ErrInvalid, "set exactly one of defaultChain and accessKeyIDFile/secretAccessKeyFile")
	case au.DefaultChain:
	case keys:
		c.absFile(p+".auth.accessKeyIDFile", au.AccessKeyIDFile, true)
		c.absFile(p+".auth.secretAccessKeyFile", au.SecretAccessKeyFile, true)
		c.absFile(p+".auth.sessionTokenFile", au.SessionTokenFile, false)
	default:
		c.report("", p+".auth", ErrRequired, "required: defaultChain: true (the host's workload identity) or accessKeyIDFile and secretAccessKeyFile")
	}
}
