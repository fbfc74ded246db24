"""yovision shared platform library."""
