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
