/* placeholder: not yet written */
