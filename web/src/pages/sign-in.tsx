import { useEffect, useState } from 'preact/hooks';
import { ApiError, request } from '../api.ts';
import type { Session } from '../types.ts';

/** The /token credentials (userName, password, privateToken), exchanged for the session cookie. */
export function SignIn(props: { onSignedIn: (session: Session) => void }) {
  const [userName, setUserName] = useState('');
  const [password, setPassword] = useState('');
  const [privateToken, setPrivateToken] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    document.title = 'Sign in · Herald console';
  }, []);

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError('');
    try {
      props.onSignedIn(
        await request<Session>('POST', '/console/session', { userName, password, privateToken }, { session: true }),
      );
    } catch (failure) {
      setError(
        failure instanceof ApiError && failure.status === 429
          ? `Too many attempts. ${failure.message}`
          : failure instanceof ApiError && failure.status === 401
            ? 'The user name, password or private token is wrong.'
            : (failure as Error).message,
      );
      setBusy(false);
    }
  };
  return (
    <main class="sign-in">
      <h1>Sign in to Herald</h1>
      <form onSubmit={submit}>
        <label for="userName">User name</label>
        <input
          id="userName"
          name="username"
          autocomplete="username"
          required
          value={userName}
          onInput={(e) => setUserName(e.currentTarget.value)}
        />
        <label for="password">Password</label>
        <input
          id="password"
          name="password"
          type="password"
          autocomplete="current-password"
          required
          value={password}
          onInput={(e) => setPassword(e.currentTarget.value)}
        />
        <label for="privateToken">Private token</label>
        <input
          id="privateToken"
          name="privateToken"
          type="password"
          autocomplete="off"
          required
          value={privateToken}
          onInput={(e) => setPrivateToken(e.currentTarget.value)}
        />
        <p role="alert" class="error">
          {error}
        </p>
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}
