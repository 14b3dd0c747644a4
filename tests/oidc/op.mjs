// A real OpenID Provider for the single sign-on tests: oidc-provider with its development login pages (any
// password), one confidential client, and accounts read from a JSON file on every sign-in, so a test can move a
// user between groups. Usage: node op.mjs PORT CLIENT_ID CLIENT_SECRET REDIRECT_URI ACCOUNTS_JSON
import { readFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const [port, clientId, clientSecret, redirectUri, accountsFile] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: clientId,
    client_secret: clientSecret,
    redirect_uris: [redirectUri],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_post',
  }],
  scopes: ['openid', 'email', 'profile', 'groups'],
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['preferred_username'], groups: ['groups'] },
  // The claims go to the userinfo endpoint (mozilla-django-oidc reads them there), not only into the ID token.
  conformIdTokenClaims: false,
  async findAccount(ctx, sub) {
    const accounts = JSON.parse(readFileSync(accountsFile, 'utf8'));
    const account = accounts[sub];
    if (!account) return undefined;
    return {
      accountId: sub,
      async claims() {
        return { sub, preferred_username: sub, email: account.email, email_verified: true, groups: account.groups };
      },
    };
  },
});
provider.listen(Number(port), '127.0.0.1', () => console.log(`oidc-provider listening on ${issuer}`));
