// A real OAuth 2.1 authorization server for tests/test_oauth.py: oidc-provider (npm), pinned
// in .ci/node-tools.sh, on 127.0.0.1:$PORT. Dynamic client registration and resource indicators
// (RFC 8707) are on; a token for a resource is a JWT (RFC 9068) whose audience is that resource.
// Sign-in is headless: every interaction logs in $OIDC_ACCOUNT (default alice) and consents to
// whatever was asked, so a client following the redirects gets its code without a person.
// With OIDC_TOKEN_FORMAT=opaque, access tokens are opaque instead, for RFC 7662 introspection by
// the client "mcp-server" (secret $OIDC_INTROSPECTION_SECRET).
// Prints "ready <issuer>" on stdout once listening.
import { generateKeyPairSync } from "node:crypto";
import http from "node:http";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

// From the npm cache dir .ci/node-tools.sh exports (MCP_OIDC_PROVIDER, its node_modules): an ES
// module import does not search NODE_PATH.
const entry = join(process.env.MCP_OIDC_PROVIDER, "oidc-provider", "lib", "index.js");
const { default: Provider } = await import(pathToFileURL(entry).href);

const port = Number(process.env.PORT);
const issuer = `http://127.0.0.1:${port}`;
const account = process.env.OIDC_ACCOUNT || "alice";
const scope = "mcp:tools";
const format = process.env.OIDC_TOKEN_FORMAT || "jwt";
const introspector = {
  client_id: "mcp-server",
  client_secret: process.env.OIDC_INTROSPECTION_SECRET || "mcp-server-introspection-secret",
  grant_types: [],
  response_types: [],
  redirect_uris: [],
};

function signingKey(type, options, alg, kid) {
  const { privateKey } = generateKeyPairSync(type, options);
  return { ...privateKey.export({ format: "jwk" }), alg, use: "sig", kid };
}

const provider = new Provider(issuer, {
  clients: [introspector],
  scopes: ["openid", "offline_access", scope],
  jwks: {
    keys: [
      signingKey("rsa", { modulusLength: 2048 }, "RS256", "rsa-1"),
      signingKey("ec", { namedCurve: "P-256" }, "ES256", "ec-1"),
    ],
  },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: (ctx, client, oneOf) => oneOf,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => ({
        scope,
        audience: resource,
        accessTokenTTL: 600,
        accessTokenFormat: format,
        jwt: { sign: { alg: "ES256" } },
      }),
    },
  },
  pkce: { required: () => true },
  findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
});

// The headless "person": log in, then grant every scope and resource the client asked for.
async function interact(req, res) {
  const { prompt, params, session } = await provider.interactionDetails(req, res);
  if (prompt.name === "login") {
    const result = { login: { accountId: account } };
    return provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
  }
  const grant = new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  const details = prompt.details;
  if (details.missingOIDCScope) grant.addOIDCScope(details.missingOIDCScope.join(" "));
  if (details.missingOIDCClaims) grant.addOIDCClaims(details.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(details.missingResourceScopes || {})) {
    grant.addResourceScope(indicator, scopes.join(" "));
  }
  const grantId = await grant.save();
  return provider.interactionFinished(req, res, { consent: { grantId } }, {
    mergeWithLastSubmission: true,
  });
}

// OIDC_DEBUG=1: a line per request with the resource and scope asked for (what a client sent).
if (process.env.OIDC_DEBUG) {
  provider.use(async (ctx, next) => {
    await next();
    const params = ctx.oidc?.params;
    if (params) {
      const { resource, scope } = params;
      console.log("DEBUG", ctx.path, JSON.stringify({ resource, scope, status: ctx.status }));
    }
  });
}
const callback = provider.callback();
const server = http.createServer((req, res) => {
  if (req.url.startsWith("/interaction/")) {
    interact(req, res).catch((error) => {
      res.statusCode = 500;
      res.end(String(error));
    });
    return;
  }
  callback(req, res);
});
server.listen(port, "127.0.0.1", () => console.log(`ready ${issuer}`));
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => process.exit(0));
