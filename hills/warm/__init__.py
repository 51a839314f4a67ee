"""The warm eval server (docs/warm.md), in the shape of Mercurial's chg: one
interpreter per user and machine state with the eval pipeline loaded,
forking a worker for each `hills eval`, so an eval does not pay for loading
its code every time.

- `client`: the start of every `hills eval` (imports nothing the
  interpreter does not already hold but `_socket`);
- `protocol`: the wire format, its named request parts and reply words;
- `server`: `python -m hills.warm serve`, the listening loop and its children;
- `worker`: one fork per request, which becomes the caller's `hills eval`;
- `spare`: the fork that waits with a standby for the next request
  (docs/standby.md);
- `control`: the running servers, their status, and stopping them
  (`hills warm status|stop`).

This file imports nothing: the client's import of it must stay free."""
