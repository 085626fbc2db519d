package devchoice

// ForceGeneral makes c always take the general path, so that tests can
// compare it with the word path.
func ForceGeneral(c *Chooser) { c.general = true }
