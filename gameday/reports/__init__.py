"""Reports: verdict tables, timeline plots, Allure attachments."""
