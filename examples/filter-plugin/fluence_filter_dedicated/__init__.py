"""An example node filter for Fluence: nodes dedicated to one namespace."""
