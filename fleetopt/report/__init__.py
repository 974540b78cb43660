"""Plans and catalogs rendered for people: terminal tables, Markdown, CSV."""
