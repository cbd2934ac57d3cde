"""Word lists the generator draws names, titles and places from (fictional data)."""

COMPANIES = ("Northwind Logistics", "Bluefin Health", "Contoso Retail", "Fabrikam Energy",
             "Tailspin Travel", "Litware Labs", "Wingtip Toys", "Adatum Insurance")  # fmt: skip
FIRST = ("Anna", "Thomas", "Elena", "José", "Zoë", "Łukasz", "Søren", "Chloé", "Jürgen",
         "Siobhán", "Björn", "François", "Inês", "Mårten", "Aisha", "Kenji", "Priya", "Omar",
         "Maria", "David", "Sarah", "James", "Laura", "Pierre", "Ngozi", "Mateo", "Olivia",
         "Lucas", "Emma", "Noah", "Ana", "Wei", "Fatima", "Ivan", "Grace", "Hugo")  # fmt: skip
LAST = ("García", "Müller", "Ødegaard", "Kowalczyk", "Dvořák", "O'Brien", "Nguyễn", "Çelik",
        "Rousseau", "Smith", "Johnson", "Brown", "Strauß", "Rossi", "Novak", "Jensen", "Silva",
        "Kim", "Patel", "Okafor", "Hernández", "Lindqvist", "Murphy", "Dubois", "Schmidt",
        "Wilson", "Taylor", "Moreau", "Weiß", "Costa", "Nowak", "Larsen", "Groß")  # fmt: skip
DEPARTMENTS = ("Engineering", "Sales", "Marketing", "Finance", "HR", "IT", "Operations",
               "Legal", "Customer Support", "Research, Development", "Procurement",
               "Facilities")  # fmt: skip
COUNTRIES = ("United States", "United Kingdom", "Germany", "France", "Spain", "Ireland",
             "Poland", "Sweden", "Norway", "Denmark", "Canada", "Mexico", "Brazil", "India",
             "Türkiye")  # fmt: skip
TEAM_WORDS = (("Blue", "Red", "Green", "Night", "Remote", "North", "South", "Core", "Data",
               "Field", "Finance", "Security", "Cloud", "Travel", "Warehouse", "Ward", "Mobile",
               "Front-line", "Audit", "Event"),
              ("Team", "Champions", "Ambassadors", "Leads", "Shift", "Squad", "Crew", "Guild",
               "Circle", "Managers", "Taskforce", "Unit", "Group", "Club", "Desk", "Hub",
               "Pod", "Network", "Council", "Workers"))  # fmt: skip
CAMPAIGNS = ("Overdue Invoice Reminder", "Parcel Delivery Failed", "Benefits Enrolment Update",
             "Shared Document: Q3 Budget", "Password Expiry Notice", "Year-End Bonus",
             "IT Helpdesk: Mailbox Full", "Voicemail Received", "CEO Urgent Request",
             "Payroll Correction", "Security Alert: New Sign-in", "Gift Card Giveaway")  # fmt: skip
COURSES = ("Phishing Fundamentals", "Password Hygiene", "Data Protection Basics",
           "Social Engineering Defence", "Secure Remote Work", "Handling Personal Data",
           "Mobile Device Security", "Incident Reporting", "Safe Browsing", "Cloud Sharing",
           "Insider Threats", "Physical Security")  # fmt: skip
SECTION_TITLES = {"lecture": "Lesson", "video": "Video", "quiz": "Quiz", "exam": "Final exam",
                  "survey": "Feedback survey"}  # fmt: skip
# Where events come from: browsers and mail clients, from documentation address ranges.
USER_AGENTS = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko)"
               " Chrome/126.0.0.0 Safari/537.36",
               "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like"
               " Gecko) Version/17.5 Safari/605.1.15",
               "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15"
               " (KHTML, like Gecko) Mobile/15E148",
               "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:127.0) Gecko/20100101 Firefox/127.0",
               "Microsoft Office/16.0 (Windows NT 10.0; Microsoft Outlook 16.0.17726; Pro)",
               "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko)"
               " Chrome/126.0.0.0 Mobile Safari/537.36")  # fmt: skip
NETWORKS = ("192.0.2.", "198.51.100.", "203.0.113.", "2001:db8::")
# What mail-security gateways' link scanners claim to be (the automation rules know them).
SCANNER_AGENTS_SEEN = ("python-requests/2.31.0", "Go-http-client/1.1",
                       "Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 5.1)",
                       "Mozilla/5.0 (compatible; bingbot/2.0)")  # fmt: skip
