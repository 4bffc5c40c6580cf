"""Fake credentials in the providers' documented formats, with random bodies.

Written from each provider's own description of its tokens, not from agentrun's rules
(``src/agentrun/data/shapes.toml``): a rule that misses a real format fails the recall
tests. One generator per provider; each cites where its format is described. Bodies come
from a seeded ``random.Random`` (no literal token sits in this repository), so every run
draws the same corpus and a change of ``SEED`` draws another.

Each fake is placed in a line the way such a credential is met: bare in prose (followed
by punctuation), in an environment assignment, in JSON or YAML, in a URL.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

SEED = 20261201
ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64URL = ALNUM + "-_"
BASE32 = string.ascii_uppercase + "234567"


@dataclass(frozen=True)
class Fake:
    provider: str
    secret: str  # what must never reach git
    line: str  # the secret as it is met in text


def pick(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def placed(rng: random.Random, name: str, secret: str) -> str:
    """``secret`` in one of the lines it is typically met in."""
    forms = [
        f"here is the key: {secret}, keep it safe.",
        f"export {name}={secret}",
        f'{{"{name.lower()}": "{secret}"}}',
        f"{name.lower()}: '{secret}'",
        f'    {name} = "{secret}"  # set by hand',
        f"debug: using ({secret})",
    ]
    return rng.choice(forms)


# --- one generator per provider ----------------------------------------------------
# Each returns (provider, secret, variable name) triples; ``fakes`` places them.

Gen = Callable[[random.Random], list[tuple[str, ...]]]


def github(rng: random.Random) -> list[tuple[str, ...]]:
    # github.blog 2021-04-05 "Behind GitHub's new authentication token formats": a prefix
    # (ghp_ personal, gho_ OAuth, ghu_ user-to-server, ghs_ server-to-server, ghr_ refresh)
    # and 36 base62 characters (30 random, 6 of checksum).
    out = [
        ("GitHub", f"{p}_{pick(rng, ALNUM, 36)}", "GITHUB_TOKEN")
        for p in ["ghp", "gho", "ghu", "ghs", "ghr"]
    ]
    # github.blog 2022-10-18 "Introducing fine-grained personal access tokens": github_pat_,
    # 22 base62 characters, an underscore, 59 base62 characters.
    fine = f"github_pat_{pick(rng, ALNUM, 22)}_{pick(rng, ALNUM, 59)}"
    return [*out, ("GitHub", fine, "GH_TOKEN")]


def gitlab(rng: random.Random) -> list[tuple[str, ...]]:
    # docs.gitlab.com/ee/security/tokens/ "Token prefixes" table, and the token lengths
    # there: personal/project/group access glpat-, OAuth application secret gloas-, deploy
    # gldt-, runner authentication glrt-, CI/CD job glcbt-, trigger glptt-, feed glft-,
    # incoming mail glimt-, agent for Kubernetes glagent-, SCIM glsoat-, feature flags
    # client glffct-, runner registration GR1348941.
    body = B64URL
    return [
        ("GitLab", f"glpat-{pick(rng, body, 20)}", "GITLAB_TOKEN"),
        ("GitLab", f"gloas-{pick(rng, body, 64)}", "GITLAB_OAUTH_SECRET"),
        ("GitLab", f"gldt-{pick(rng, body, 20)}", "DEPLOY_TOKEN"),
        ("GitLab", f"glrt-{pick(rng, body, 20)}", "RUNNER_TOKEN"),
        ("GitLab", f"glcbt-{pick(rng, ALNUM, 2)}_{pick(rng, body, 20)}", "CI_JOB_TOKEN"),
        ("GitLab", f"glptt-{pick(rng, HEX, 40)}", "TRIGGER_TOKEN"),
        ("GitLab", f"glft-{pick(rng, body, 20)}", "FEED_TOKEN"),
        ("GitLab", f"glimt-{pick(rng, body, 25)}", "MAIL_TOKEN"),
        ("GitLab", f"glagent-{pick(rng, body, 50)}", "AGENT_TOKEN"),
        ("GitLab", f"glsoat-{pick(rng, body, 20)}", "SCIM_TOKEN"),
        ("GitLab", f"glffct-{pick(rng, body, 20)}", "FLAGS_TOKEN"),
        ("GitLab", f"GR1348941{pick(rng, body, 20)}", "REGISTRATION_TOKEN"),
    ]


def slack(rng: random.Random) -> list[tuple[str, ...]]:
    # api.slack.com/authentication/token-types: bot xoxb-, user xoxp-, app-level xapp-,
    # each of numeric team/user ids and a random tail.
    bot = (
        f"xoxb-{pick(rng, string.digits, 12)}-{pick(rng, string.digits, 13)}-{pick(rng, ALNUM, 24)}"
    )
    ids = "-".join(pick(rng, string.digits, 12) for _ in range(3))
    user = f"xoxp-{ids}-{pick(rng, HEX, 32)}"
    upper = string.ascii_uppercase + string.digits
    app = f"xapp-1-A{pick(rng, upper, 10)}-{pick(rng, string.digits, 13)}-{pick(rng, HEX, 64)}"
    # api.slack.com/messaging/webhooks: https://hooks.slack.com/services/T…/B…/<24 chars>.
    team, hook = (
        pick(rng, string.ascii_uppercase + string.digits, 10),
        pick(rng, string.ascii_uppercase + string.digits, 10),
    )
    webhook = f"https://hooks.slack.com/services/T{team}/B{hook}/{pick(rng, ALNUM, 24)}"
    return [
        ("Slack", bot, "SLACK_BOT_TOKEN"),
        ("Slack", user, "SLACK_USER_TOKEN"),
        ("Slack", app, "SLACK_APP_TOKEN"),
        ("Slack webhook", webhook, "SLACK_WEBHOOK_URL"),
    ]


def stripe(rng: random.Random) -> list[tuple[str, ...]]:
    # docs.stripe.com/keys: secret keys sk_live_/sk_test_, restricted keys rk_live_/rk_test_,
    # base62 bodies (24 characters in older keys, 99 in current ones).
    return [
        ("Stripe", f"sk_live_{pick(rng, ALNUM, 99)}", "STRIPE_SECRET_KEY"),
        ("Stripe", f"sk_test_{pick(rng, ALNUM, 24)}", "STRIPE_KEY"),
        ("Stripe", f"rk_live_{pick(rng, ALNUM, 99)}", "STRIPE_RESTRICTED_KEY"),
    ]


def aws(rng: random.Random) -> list[tuple[str, ...]]:
    # docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html "unique ID
    # prefixes": AKIA (access key), ASIA (temporary STS key); 16 more base32 characters.
    # docs.aws.amazon.com/cli/latest/userguide/cli-configure-files.html: the secret access
    # key is 40 characters of base64, set as aws_secret_access_key or AWS_SECRET_ACCESS_KEY.
    key = pick(rng, ALNUM + "/+", 40)
    return [
        ("AWS", f"AKIA{pick(rng, BASE32, 16)}", "AWS_ACCESS_KEY_ID"),
        ("AWS", f"ASIA{pick(rng, BASE32, 16)}", "AWS_ACCESS_KEY_ID"),
        ("AWS secret", key, "AWS_SECRET_ACCESS_KEY"),
    ]


def google(rng: random.Random) -> list[tuple[str, ...]]:
    # cloud.google.com/docs/authentication/api-keys: keys are 39 characters, AIza and 35
    # characters of base64url.
    return [("Google", f"AIza{pick(rng, B64URL, 35)}", "GOOGLE_API_KEY")]


def npm(rng: random.Random) -> list[tuple[str, ...]]:
    # github.blog 2021-09-23 "npm has a new access token format": npm_ and 36 base62.
    return [("npm", f"npm_{pick(rng, ALNUM, 36)}", "NPM_TOKEN")]


def pypi(rng: random.Random) -> list[tuple[str, ...]]:
    # pypi.org/help/#apitoken and warehouse's macaroon tokens: pypi- and a serialized
    # macaroon in base64url, whose first field is its location (pypi.org, or
    # test.pypi.org for TestPyPI); then an identifier and a signature.
    def token(location: bytes) -> str:
        macaroon = bytes([2, 1, len(location)]) + location + bytes([2, 32]) + rng.randbytes(80)
        return "pypi-" + b64url(macaroon)

    return [
        ("PyPI", token(b"pypi.org"), "PYPI_TOKEN"),
        ("PyPI", token(b"test.pypi.org"), "TEST_PYPI_TOKEN"),
    ]


def huggingface(rng: random.Random) -> list[tuple[str, ...]]:
    # huggingface.co/docs/hub/security-tokens: user access tokens hf_ and 34 letters;
    # organization API tokens api_org_ and 34 letters.
    return [
        ("Hugging Face", f"hf_{pick(rng, string.ascii_letters, 34)}", "HF_TOKEN"),
        ("Hugging Face", f"api_org_{pick(rng, string.ascii_letters, 34)}", "HF_ORG_TOKEN"),
    ]


def openai(rng: random.Random) -> list[tuple[str, ...]]:
    # platform.openai.com/docs/api-reference/authentication and help.openai.com "project
    # API keys": sk-proj-, sk-svcacct-, sk-admin- (and legacy sk-); the body carries
    # T3BlbkFJ ("OpenAI" in base64) between two random halves.
    half = 74
    return [
        (
            "OpenAI",
            f"sk-proj-{pick(rng, B64URL, half)}T3BlbkFJ{pick(rng, B64URL, half)}",
            "OPENAI_API_KEY",
        ),
        (
            "OpenAI",
            f"sk-svcacct-{pick(rng, B64URL, half)}T3BlbkFJ{pick(rng, B64URL, half)}",
            "OPENAI_API_KEY",
        ),
        ("OpenAI", f"sk-{pick(rng, ALNUM, 20)}T3BlbkFJ{pick(rng, ALNUM, 20)}", "OPENAI_API_KEY"),
    ]


def anthropic(rng: random.Random) -> list[tuple[str, ...]]:
    # docs.anthropic.com/en/api/getting-started "Authentication" and the Console: API keys
    # sk-ant-api03-, admin keys sk-ant-admin01-, 95 characters of base64url ending AA.
    return [
        ("Anthropic", f"sk-ant-api03-{pick(rng, B64URL, 93)}AA", "ANTHROPIC_API_KEY"),
        ("Anthropic", f"sk-ant-admin01-{pick(rng, B64URL, 93)}AA", "ANTHROPIC_ADMIN_KEY"),
    ]


def sendgrid(rng: random.Random) -> list[tuple[str, ...]]:
    # www.twilio.com/docs/sendgrid/ui/account-and-settings/api-keys: SG., a 22-character
    # key id, a dot, a 43-character secret, both base64url (69 characters).
    return [("SendGrid", f"SG.{pick(rng, B64URL, 22)}.{pick(rng, B64URL, 43)}", "SENDGRID_API_KEY")]


def twilio(rng: random.Random) -> list[tuple[str, ...]]:
    # www.twilio.com/docs/iam/api-keys: API key SIDs are SK and 32 hex digits; the auth
    # token (www.twilio.com/docs/iam/credentials) is 32 hex digits, TWILIO_AUTH_TOKEN.
    return [
        ("Twilio", f"SK{pick(rng, HEX, 32)}", "TWILIO_API_KEY"),
        ("Twilio", pick(rng, HEX, 32), "TWILIO_AUTH_TOKEN"),
    ]


def jwt(rng: random.Random) -> list[tuple[str, ...]]:
    # RFC 7519 §3 and RFC 7515 §7.1: base64url(header) . base64url(claims) . base64url(sig).
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = {
        "sub": pick(rng, string.digits, 10),
        "name": pick(rng, string.ascii_lowercase, 8),
        "iat": rng.randrange(10**9, 2 * 10**9),
    }
    body = b64url(json.dumps(claims).encode())
    return [("JWT", f"{header}.{body}.{b64url(rng.randbytes(32))}", "SESSION_JWT")]


def private_keys(rng: random.Random) -> list[tuple[str, ...]]:
    # RFC 7468 §2 (PEM: -----BEGIN <label>----- base64 lines -----END <label>-----),
    # OpenSSH's PROTOCOL.key, RFC 4880 §6.2 (PGP armor "PRIVATE KEY BLOCK").
    def block(label: str) -> str:
        body = base64.b64encode(rng.randbytes(300)).decode()
        lines = [body[i : i + 64] for i in range(0, len(body), 64)]
        return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"])

    labels = [
        "RSA PRIVATE KEY",
        "OPENSSH PRIVATE KEY",
        "EC PRIVATE KEY",
        "PRIVATE KEY",
        "PGP PRIVATE KEY BLOCK",
    ]
    return [("private key", block(label), "") for label in labels]


def azure(rng: random.Random) -> list[tuple[str, ...]]:
    # learn.microsoft.com/azure/storage/common/storage-configure-connection-string: an
    # account key is 64 bytes in base64; a SAS's sig= is a URL-encoded HMAC-SHA256
    # (learn.microsoft.com/rest/api/storageservices/create-account-sas).
    account = pick(rng, string.ascii_lowercase + string.digits, 12)
    key = base64.b64encode(rng.randbytes(64)).decode()
    connection = (
        f"DefaultEndpointsProtocol=https;AccountName={account};AccountKey={key};"
        "EndpointSuffix=core.windows.net"
    )
    sig = (
        base64.b64encode(rng.randbytes(32))
        .decode()
        .replace("+", "%2B")
        .replace("/", "%2F")
        .replace("=", "%3D")
    )
    sas = f"https://{account}.blob.core.windows.net/c?sv=2022-11-02&ss=b&srt=sco&sp=rl&se=2027-01-01T00:00:00Z&sig={sig}"
    return [
        ("Azure storage", key, "AZURE_STORAGE_CONNECTION_STRING", connection),
        ("Azure SAS", sig, "AZURE_SAS_URL", sas),
    ]


def shopify(rng: random.Random) -> list[tuple[str, ...]]:
    # shopify.dev/docs/apps/build/authentication-authorization/access-tokens: shpat_ admin
    # API, shpca_ custom app, shppa_ private app, shpss_ shared secret; 32 hex digits.
    return [
        ("Shopify", f"{p}_{pick(rng, HEX, 32)}", "SHOPIFY_TOKEN")
        for p in ("shpat", "shpca", "shppa", "shpss")
    ]


def digitalocean(rng: random.Random) -> list[tuple[str, ...]]:
    # docs.digitalocean.com/reference/api/create-personal-access-token/ and DigitalOcean's
    # token prefixes (2021): dop_v1_ personal, doo_v1_ OAuth, dor_v1_ refresh; 64 hex.
    return [
        ("DigitalOcean", f"{p}_v1_{pick(rng, HEX, 64)}", "DIGITALOCEAN_TOKEN")
        for p in ("dop", "doo", "dor")
    ]


def discord(rng: random.Random) -> list[tuple[str, ...]]:
    # discord.com/developers/docs/resources/webhook "Execute Webhook":
    # https://discord.com/api/webhooks/{webhook.id}/{webhook.token}; the id a snowflake
    # (17 to 19 digits), the token 68 characters of base64url.
    hook_id = pick(rng, string.digits, rng.choice([17, 18, 19]))
    url = f"https://discord.com/api/webhooks/{hook_id}/{pick(rng, B64URL, 68)}"
    return [("Discord webhook", url, "DISCORD_WEBHOOK")]


def mailgun(rng: random.Random) -> list[tuple[str, ...]]:
    # documentation.mailgun.com "API keys": legacy private keys key- and 32 hex digits;
    # current keys and the webhook signing key are 32, 8 and 8 hex digits joined by -.
    current = f"{pick(rng, HEX, 32)}-{pick(rng, HEX, 8)}-{pick(rng, HEX, 8)}"
    return [
        ("Mailgun", f"key-{pick(rng, HEX, 32)}", "MAILGUN_API_KEY"),
        ("Mailgun", current, "MAILGUN_API_KEY"),
    ]


def databricks(rng: random.Random) -> list[tuple[str, ...]]:
    # docs.databricks.com/dev-tools/auth/pat.html: personal access tokens dapi and 32 hex.
    return [("Databricks", f"dapi{pick(rng, HEX, 32)}", "DATABRICKS_TOKEN")]


def linear(rng: random.Random) -> list[tuple[str, ...]]:
    # linear.app/developers "Personal API keys": lin_api_ and 40 base62 characters.
    return [("Linear", f"lin_api_{pick(rng, ALNUM, 40)}", "LINEAR_API_KEY")]


def postman(rng: random.Random) -> list[tuple[str, ...]]:
    # learning.postman.com/docs/developer/postman-api/authentication/: PMAK-, 24 hex, -,
    # 34 hex.
    return [("Postman", f"PMAK-{pick(rng, HEX, 24)}-{pick(rng, HEX, 34)}", "POSTMAN_API_KEY")]


def doppler(rng: random.Random) -> list[tuple[str, ...]]:
    # docs.doppler.com/reference/auth-token-formats: dp.pt. personal, dp.st. service
    # (dp.st.<config>.), dp.ct. CLI, dp.sa. service account; 40 to 44 base62 characters.
    return [
        ("Doppler", f"dp.pt.{pick(rng, ALNUM, 43)}", "DOPPLER_TOKEN"),
        ("Doppler", f"dp.st.prd.{pick(rng, ALNUM, 43)}", "DOPPLER_TOKEN"),
        ("Doppler", f"dp.ct.{pick(rng, ALNUM, 43)}", "DOPPLER_TOKEN"),
        ("Doppler", f"dp.sa.{pick(rng, ALNUM, 43)}", "DOPPLER_TOKEN"),
    ]


def telegram(rng: random.Random) -> list[tuple[str, ...]]:
    # core.telegram.org/bots/api "Authorizing your bot": <bot id>:<secret>, as in
    # 123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11; BotFather's are a 9- or 10-digit id and
    # 35 base64url characters starting AA.
    bot = pick(rng, string.digits, rng.choice([9, 10]))
    return [("Telegram", f"{bot}:AA{pick(rng, B64URL, 33)}", "TELEGRAM_BOT_TOKEN")]


def url_credentials(rng: random.Random) -> list[tuple[str, ...]]:
    # RFC 3986 §3.2.1: scheme://user:password@host, reserved characters of the password
    # percent-encoded. As services hand them out: Heroku Postgres (a 64-hex password),
    # Redis Cloud and CloudAMQP (32 characters), MongoDB Atlas (mongodb+srv), a password
    # with @ and / encoded; GitHub's token as the user with x-oauth-basic.
    user = pick(rng, string.ascii_lowercase, 14)
    heroku = pick(rng, HEX, 64)
    redis = pick(rng, ALNUM, 32)
    amqp = pick(rng, B64URL, 32)
    atlas = pick(rng, ALNUM, 20)
    encoded = f"{pick(rng, ALNUM, 10)}%40{pick(rng, ALNUM, 8)}%2F{pick(rng, ALNUM, 4)}"
    token = pick(rng, HEX, 40)
    port = rng.randrange(10000, 19999)
    return [
        ("URL password", heroku, "DATABASE_URL",
         f"postgres://{user}:{heroku}@ec2-3-{port % 250}-1-2.compute-1.amazonaws.com:5432/{user}"),
        ("URL password", redis, "REDIS_URL",
         f"redis://default:{redis}@redis-{port}.c1.us-east-1-2.ec2.cloud.redislabs.com:{port}"),
        ("URL password", amqp, "CLOUDAMQP_URL", f"amqps://{user}:{amqp}@rat.rmq2.cloudamqp.com/{user}"),
        ("URL password", atlas, "MONGODB_URI",
         f"mongodb+srv://admin:{atlas}@cluster0.{pick(rng, HEX, 5)}.mongodb.net/?retryWrites=true"),
        ("URL password", encoded, "DB_URL", f"mysql://app:{encoded}@db.internal:3306/app"),
        ("URL password", token, "REMOTE", f"https://{token}:x-oauth-basic@github.com/acme/app.git"),
    ]  # fmt: skip


def authorization(rng: random.Random) -> list[tuple[str, ...]]:
    # RFC 7235 §2.1 credentials = auth-scheme [token68]; RFC 6750 Bearer; RFC 7617 Basic
    # (base64 of user:password, or of an API key and an empty password, as Stripe and
    # Twilio take it); Django REST framework's and GitHub's Token; Okta's SSWS (00 and 40
    # characters); Discord's Bot (three base64url parts). Met as a header line, in curl,
    # in JSON, in a dict, as a call's arguments.
    def basic(user: str, password: str) -> str:
        return base64.b64encode(f"{user}:{password}".encode()).decode()

    bearer = pick(rng, B64URL, 40)
    token = pick(rng, HEX, 40)
    login = basic(pick(rng, string.ascii_lowercase, 8), pick(rng, ALNUM, 20))
    keyed = basic(pick(rng, ALNUM, 32), "")
    okta = "00" + pick(rng, B64URL, 40)
    bot = f"{pick(rng, B64URL, 24)}.{pick(rng, B64URL, 6)}.{pick(rng, B64URL, 27)}"
    proxy = basic("ci", pick(rng, ALNUM, 24))
    return [
        ("Authorization header", bearer, "",
         f'curl -H "Authorization: Bearer {bearer}" https://api.internal/v1/items'),
        ("Authorization header", token, "", f"headers = {{'Authorization': 'Token {token}'}}"),
        ("Authorization header", login, "", f"Authorization: Basic {login}"),
        ("Authorization header", keyed, "", f'{{"authorization": "Basic {keyed}"}}'),
        ("Authorization header", okta, "", f'req.Header.Set("Authorization", "SSWS {okta}")'),
        ("Authorization header", bot, "", f"authorization: Bot {bot}"),
        ("Authorization header", proxy, "", f"-H 'Proxy-Authorization: Basic {proxy}'"),
    ]  # fmt: skip


def generic(rng: random.Random) -> list[tuple[str, ...]]:
    # No provider: an assignment of api_key, password, secret or token to a random value
    # (24 to 40 characters of base62 and some punctuation: above 3.5 bits per character).
    return [
        ("generic", pick(rng, ALNUM, 32), "API_KEY"),
        ("generic", pick(rng, ALNUM + "!#%^*", 24), "PASSWORD"),
        ("generic", pick(rng, ALNUM + "-_", 40), "CLIENT_SECRET"),
    ]


GENERATORS: tuple[Gen, ...] = (
    github,
    gitlab,
    slack,
    stripe,
    aws,
    google,
    npm,
    pypi,
    huggingface,
    openai,
    anthropic,
    sendgrid,
    twilio,
    jwt,
    private_keys,
    azure,
    shopify,
    digitalocean,
    discord,
    mailgun,
    databricks,
    linear,
    postman,
    doppler,
    telegram,
    url_credentials,
    authorization,
    generic,
)


def fakes(seed: int = SEED) -> list[Fake]:
    """The corpus: every generator's fakes, each placed in a line."""
    rng = random.Random(seed)
    out: list[Fake] = []
    for generator in GENERATORS:
        for provider, secret, name, *whole in generator(rng):
            text = whole[0] if whole else secret
            if provider == "Authorization header":  # a header is its own line
                line = text
            elif not name:  # a key block stands alone
                line = f"the key:\n{text}\nend"
            elif provider in ("AWS secret", "Twilio", "generic", "Mailgun") and text == secret:
                line = _assigned(rng, name, secret)  # a bare value is only a secret by its name
            else:
                line = placed(rng, name, text)
            out.append(Fake(provider, secret, line))
    return out


def _assigned(rng: random.Random, name: str, secret: str) -> str:
    forms = [
        f"export {name}={secret}",
        f'{name.lower()} = "{secret}"',
        f'{{"{name.lower()}": "{secret}"}}',
        f"{name.lower()}: {secret}",
    ]
    return rng.choice(forms)


PROVIDERS = sorted({f.provider for f in fakes()})
