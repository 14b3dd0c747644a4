"""The pages' date formats (FORMAT_MODULE_PATH): one date and time format, defined here, for the pages' `when`
filter and for Django's own rendering of dates (the admin's lists and forms)."""
