"""The one exception type for errors a user can fix."""


class UserError(Exception):
  """Bad input or configuration: the message names the file or key, what was expected, and the fix."""
